#include "deploy/local/local_cluster.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/daemon/exit_codes.h"
#include "common/status_macros.h"
#include "deploy/local/free_port.h"
#include "nlohmann/json.hpp"

namespace pstrain {

std::string MakeTfConfig(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& cluster,
    const std::string& type, int index) {
  nlohmann::json config;
  for (const auto& [job, addresses] : cluster) config["cluster"][job] = addresses;
  config["task"] = {{"type", type}, {"index", index}};
  return config.dump();
}

bool RestartLikeAnOrchestrator(const ProcessGroup::Exit& exit) {
  if (exit.exit_code == 2 || exit.restarts >= 3) return false;
  // The chief's own exit code is the job's verdict; only a chief that was killed, crashed
  // or preempted (SIGTERM during training: exit 42 after a checkpoint) comes back, and
  // resumes from the latest checkpoint.
  if (exit.name == "chief") return exit.signal != 0 || exit.exit_code == kExitPreempted;
  return true;
}

absl::Status StartLocalCluster(const LocalClusterOptions& options, ProcessGroup* group) {
  if (options.num_ps < 1 || options.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a cluster needs at least one ps and one worker (got ",
                                                   options.num_ps, " ps, ", options.num_workers,
                                                   " workers)"));
  }
  const int num_tasks = 1 + options.num_ps + options.num_workers;
  PS_ASSIGN_OR_RETURN(std::vector<int> ports,
                      PickFreePorts(options.metrics_ports != nullptr ? 2 * num_tasks : num_tasks));
  int next_metrics_port = num_tasks;
  auto address = [&](int port) { return absl::StrCat(options.host, ":", port); };
  std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {address(ports[0])}}, {"ps", {}}, {"worker", {}}};
  for (int i = 0; i < options.num_ps; ++i) cluster[1].second.push_back(address(ports[1 + i]));
  for (int i = 0; i < options.num_workers; ++i) {
    cluster[2].second.push_back(address(ports[1 + options.num_ps + i]));
  }

  auto start = [&](const std::string& type, int index, const std::string& binary,
                   std::vector<std::string> args) {
    ProcessGroup::Spec spec;
    spec.name = type == "chief" ? "chief" : absl::StrCat(type, index);
    spec.binary = absl::StrCat(options.bin_dir, "/", binary);
    spec.args = std::move(args);
    spec.args.insert(spec.args.end(), options.task_args.begin(), options.task_args.end());
    spec.env["TF_CONFIG"] = MakeTfConfig(cluster, type, index);
    if (options.metrics_ports != nullptr) {
      const int port = ports[next_metrics_port++];
      (*options.metrics_ports)[spec.name] = port;
      spec.args.push_back(absl::StrCat("--metrics_port=", port));
    }
    // Several processes share this machine's cores: one BLAS thread each is fastest
    // (notes/performance-facts.md), unless the user chose otherwise.
    if (getenv("OPENBLAS_NUM_THREADS") == nullptr) spec.env["OPENBLAS_NUM_THREADS"] = "1";
    return group->Start(spec);
  };
  for (int i = 0; i < options.num_ps; ++i) {
    PS_RETURN_IF_ERROR(start("ps", i, "ps_server/ps_server", options.ps_args));
  }
  for (int i = 0; i < options.num_workers; ++i) {
    PS_RETURN_IF_ERROR(start("worker", i, "worker/worker", options.worker_args));
  }
  return start("chief", 0, "chief/chief", options.chief_args);
}

}  // namespace pstrain
