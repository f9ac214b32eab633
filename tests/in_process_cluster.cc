#include "tests/in_process_cluster.h"

#include <memory>
#include <thread>

#include "common/daemon/daemon_runtime.h"
#include "deploy/local/local_cluster.h"
#include "ps_server/ps_task.h"
#include "tests/cluster_test_util.h"
#include "worker/worker_task.h"

namespace pstrain {

std::vector<int> RunInProcessCluster(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& cluster,
    const ChiefOptions& chief, std::ostream& out) {
  size_t num_ps = 0, num_workers = 0;
  for (const auto& [job, addresses] : cluster) {
    if (job == "ps") num_ps = addresses.size();
    if (job == "worker") num_workers = addresses.size();
  }
  const size_t tasks = 1 + num_ps + num_workers;
  std::vector<int> exit_codes(tasks, -1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < num_ps; ++i) {
    threads.emplace_back([&, i] {
      DaemonRuntime runtime(FastDaemonOptions(MakeTfConfig(cluster, "ps", static_cast<int>(i))));
      exit_codes[1 + i] = RunPsTask(&runtime);
    });
  }
  for (size_t i = 0; i < num_workers; ++i) {
    const size_t at = 1 + num_ps + i;
    threads.emplace_back([&, i, at] {
      DaemonRuntime runtime(
          FastDaemonOptions(MakeTfConfig(cluster, "worker", static_cast<int>(i))));
      exit_codes[at] = RunWorkerTask(&runtime, "cpu");
    });
  }
  DaemonRuntime chief_runtime(FastDaemonOptions(MakeTfConfig(cluster, "chief", 0)));
  exit_codes[0] = RunChiefTask(chief, &chief_runtime, out);
  for (std::thread& t : threads) t.join();
  return exit_codes;
}

}  // namespace pstrain
