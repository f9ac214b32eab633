// A whole cluster in one process: the chief, 2 ps and 2 worker tasks run as threads, each
// with its own real gRPC server on a free port, configured by TF_CONFIG exactly as the
// daemons are (as XLA's coordination-service client_server_test does).

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"
#include "chief/chief_task.h"
#include "common/cluster_spec.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "gtest/gtest.h"
#include "ps_server/ps_task.h"
#include "tests/cluster_test_util.h"
#include "tests/ps_final_status.h"
#include "worker/worker_task.h"

namespace pstrain {
namespace {

// Addresses on free loopback ports for a cluster of 1 chief, `ps` ps and `workers` workers.
std::vector<std::pair<std::string, std::vector<std::string>>> LoopbackCluster(int ps, int workers) {
  auto ports = PickFreePorts(1 + ps + workers);
  EXPECT_TRUE(ports.ok()) << ports.status();
  std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {}}, {"ps", {}}, {"worker", {}}};
  if (!ports.ok()) return cluster;
  for (int i = 0; i < 1 + ps + workers; ++i) {
    const int job = i == 0 ? 0 : (i <= ps ? 1 : 2);
    cluster[job].second.push_back("127.0.0.1:" + std::to_string((*ports)[i]));
  }
  return cluster;
}

// Runs the tiny job at `job_path` on 1 chief, 2 ps and 2 workers as threads; returns the
// chief's output after checking that every task exited 0 and the loss fell over 4 epochs.
std::string RunTinyCluster(const std::string& job_path) {
  const auto cluster = LoopbackCluster(2, 2);
  int exit_codes[5] = {-1, -1, -1, -1, -1};
  std::vector<std::thread> tasks;
  for (int i = 0; i < 2; ++i) {
    tasks.emplace_back([&, i] {
      DaemonRuntime runtime(FastDaemonOptions(MakeTfConfig(cluster, "ps", i)));
      exit_codes[1 + i] = RunPsTask(&runtime);
    });
    tasks.emplace_back([&, i] {
      DaemonRuntime runtime(FastDaemonOptions(MakeTfConfig(cluster, "worker", i)));
      exit_codes[3 + i] = RunWorkerTask(&runtime, "cpu");
    });
  }
  ChiefOptions chief;
  chief.job_path = job_path;
  chief.steps_per_call = 3;  // several RunSteps calls per epoch
  std::ostringstream out;
  DaemonRuntime chief_runtime(FastDaemonOptions(MakeTfConfig(cluster, "chief", 0)));
  exit_codes[0] = RunChiefTask(chief, &chief_runtime, out);
  for (std::thread& t : tasks) t.join();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(exit_codes[i], 0) << "task " << i;
  const std::vector<double> losses = ParseEpochLosses(out.str());
  EXPECT_EQ(losses.size(), 4u) << out.str();
  if (!losses.empty()) {
    EXPECT_LT(losses.back(), losses.front()) << out.str();
  }
  return out.str();
}

TEST(InProcessClusterTest, TrainsAndEveryTaskExitsCleanly) {
  const std::string out = RunTinyCluster("tests/testdata/tiny_synthetic.json");
  EXPECT_NE(out.find("Epoch 4/4 - "), std::string::npos) << out;
  EXPECT_NE(out.find("/step - loss: "), std::string::npos) << out;
}

// The tiny job with each `from` text replaced by its `to`, written to a temp file.
std::string WriteJobWith(const std::string& name,
                         const std::vector<std::pair<std::string, std::string>>& edits) {
  std::ifstream in("tests/testdata/tiny_synthetic.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string job = text.str();
  for (const auto& [from, to] : edits) {
    const size_t at = job.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) job.replace(at, from.size(), to);
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << job;
  return path;
}

// Every variable split in two over the 2 ps (size-balanced), with validation so the
// chief's evaluation pull reassembles the shards: the job trains as an unsplit one does.
TEST(InProcessClusterTest, TrainsWithPartitionedVariables) {
  const std::string train =
      R"("train": {"type": "synthetic", "samples": 400, "features": 784, "classes": 10, "seed": 5})";
  testing::internal::CaptureStderr();
  const std::string out = RunTinyCluster(WriteJobWith(
      "partitioned.json",
      {{"\"seed\": 3", R"("placement": {"strategy": "size_balanced", "num_shards": 2}, "seed": 3)"},
       {train, train + R"(, "validation": {"type": "synthetic", "samples": 100, "features": 784,
                                           "classes": 10, "seed": 6})"}}));
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("val_loss: "), std::string::npos) << out;
  // What each ps itself held at the end: every variable in two parts, one on each ps,
  // whose rows add up to the variable's, and every part trained (pushed to).
  const std::map<int, PsStatusResponse> ps = FinalPsStatuses(log);
  ASSERT_EQ(ps.size(), 2u) << log;
  std::map<std::string, std::set<int>> holders;
  std::map<std::string, int64_t> rows;
  for (const auto& [index, status] : ps) {
    for (const VariableInfo& v : status.variables()) {
      const size_t part = v.name().rfind("/part_");
      ASSERT_NE(part, std::string::npos) << v.name() << " is not a part";
      holders[v.name().substr(0, part)].insert(index);
      rows[v.name().substr(0, part)] += v.shape(0);
      EXPECT_EQ(v.version(), status.pushes()) << v.name() << " on ps " << index;
    }
    EXPECT_GT(status.pushes(), 0) << index;
  }
  const std::map<std::string, int64_t> full_rows = {
      {"dense/kernel", 784}, {"dense/bias", 64}, {"dense_1/kernel", 64}, {"dense_1/bias", 10}};
  EXPECT_EQ(rows, full_rows);
  for (const auto& [name, on] : holders) EXPECT_EQ(on, (std::set<int>{0, 1})) << name;
}

TEST(InProcessClusterTest, BadPlacementInTheJobFailsTheChiefAtStart) {
  const auto cluster = LoopbackCluster(1, 1);
  ChiefOptions chief;
  chief.job_path = WriteJobWith(
      "bad_placement.json", {{"\"seed\": 3", R"("placement": {"strategy": "random"}, "seed": 3)"}});
  DaemonRuntime runtime(FastDaemonOptions(MakeTfConfig(cluster, "chief", 0)));
  std::ostringstream out;
  // Exit 2 at once, without waiting for any task to register.
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunChiefTask(chief, &runtime, out), 2);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(InProcessClusterTest, ChiefNamesTasksThatNeverRegister) {
  const auto cluster = LoopbackCluster(1, 1);
  ChiefOptions chief;
  DaemonOptions daemon = FastDaemonOptions(MakeTfConfig(cluster, "chief", 0));
  daemon.register_timeout = absl::Milliseconds(500);
  chief.job_path = "tests/testdata/tiny_synthetic.json";
  DaemonRuntime runtime(daemon);
  std::ostringstream out;
  // Nothing else runs: the chief must give up, not wait forever, and its error names both
  // tasks with their addresses.
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunChiefTask(chief, &runtime, out), 1);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.str().find("Epoch"), std::string::npos) << out.str();
  EXPECT_NE(log.find("never registered"), std::string::npos) << log;
  EXPECT_NE(log.find("ps 0 (" + cluster[1].second[0] + ")"), std::string::npos) << log;
  EXPECT_NE(log.find("worker 0 (" + cluster[2].second[0] + ")"), std::string::npos) << log;
}

TEST(InProcessClusterTest, WorkerWithoutChiefGivesUpAndNamesIt) {
  const auto cluster = LoopbackCluster(1, 1);
  DaemonOptions options = FastDaemonOptions(MakeTfConfig(cluster, "worker", 0));
  options.register_timeout = absl::Milliseconds(500);
  DaemonRuntime runtime(options);
  EXPECT_EQ(RunWorkerTask(&runtime, "cpu"), 1);
  EXPECT_NE(runtime.shutdown()->reason().find("chief (" + cluster[0].second[0] + ")"),
            std::string::npos)
      << runtime.shutdown()->reason();
}

// SyncReplicasOptimizer semantics: every ps averages both workers' gradients per version.
TEST(InProcessClusterTest, TrainsInSyncMode) {
  RunTinyCluster(WriteJobWith(
      "sync.json",
      {{"\"seed\": 3",
        R"("consistency": {"mode": "sync", "timeout_ms": 3000}, "seed": 3)"}}));
}

// SSP: no worker runs more than one step ahead of the other within an epoch.
TEST(InProcessClusterTest, TrainsWithBoundedStaleness) {
  RunTinyCluster(WriteJobWith(
      "bounded.json",
      {{"\"seed\": 3",
        R"("consistency": {"mode": "bounded_staleness", "staleness": 1, "timeout_ms": 3000},
            "seed": 3)"}}));
}

// A bad consistency value fails the chief at start with exit code 2, before any task is
// waited for.
TEST(InProcessClusterTest, BadConsistencyFailsTheChiefAtStart) {
  const auto cluster = LoopbackCluster(1, 1);
  ChiefOptions chief;
  chief.job_path = WriteJobWith(
      "bad_consistency.json",
      {{"\"seed\": 3", R"("consistency": {"mode": "lockstep"}, "seed": 3)"}});
  DaemonRuntime runtime(FastDaemonOptions(MakeTfConfig(cluster, "chief", 0)));
  std::ostringstream out;
  EXPECT_EQ(RunChiefTask(chief, &runtime, out), 2);
}

}  // namespace
}  // namespace pstrain
