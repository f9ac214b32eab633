// A whole cluster in one process: the chief, 2 ps and 2 worker tasks run as threads, each
// with its own real gRPC server on a free port, configured by TF_CONFIG exactly as the
// daemons are (as XLA's coordination-service client_server_test does).

#include <sstream>
#include <thread>

#include "chief/chief_task.h"
#include "common/cluster_spec.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "gtest/gtest.h"
#include "ps_server/ps_task.h"
#include "tests/cluster_test_util.h"
#include "worker/worker_task.h"

namespace pstrain {
namespace {

DaemonOptions OptionsFor(const std::string& tf_config) {
  DaemonOptions options;
  absl::StatusOr<TfConfig> config = ParseTfConfig(tf_config);
  EXPECT_TRUE(config.ok()) << config.status();
  options.config = *config;
  options.register_timeout = absl::Seconds(30);
  options.heartbeat_interval = absl::Milliseconds(200);
  options.chief_timeout = absl::Seconds(10);
  options.rpc_timeout = absl::Seconds(10);
  return options;
}

TEST(InProcessClusterTest, TrainsAndEveryTaskExitsCleanly) {
  auto ports = PickFreePorts(5);
  ASSERT_TRUE(ports.ok()) << ports.status();
  auto address = [&](int i) { return "127.0.0.1:" + std::to_string((*ports)[i]); };
  const std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {address(0)}}, {"ps", {address(1), address(2)}},
      {"worker", {address(3), address(4)}}};

  ShutdownSignal signals[5];
  int exit_codes[5] = {-1, -1, -1, -1, -1};
  std::vector<std::thread> tasks;
  for (int i = 0; i < 2; ++i) {
    tasks.emplace_back([&, i] {
      exit_codes[1 + i] = RunPsTask(OptionsFor(MakeTfConfig(cluster, "ps", i)), &signals[1 + i]);
    });
    tasks.emplace_back([&, i] {
      exit_codes[3 + i] =
          RunWorkerTask(OptionsFor(MakeTfConfig(cluster, "worker", i)), "cpu", &signals[3 + i]);
    });
  }
  ChiefOptions chief;
  chief.daemon = OptionsFor(MakeTfConfig(cluster, "chief", 0));
  chief.job_path = "tests/testdata/tiny_synthetic.json";
  chief.steps_per_call = 3;  // several RunSteps calls per epoch
  std::ostringstream out;
  exit_codes[0] = RunChiefTask(chief, &signals[0], out);
  for (std::thread& t : tasks) t.join();

  for (int i = 0; i < 5; ++i) EXPECT_EQ(exit_codes[i], 0) << "task " << i;
  const std::vector<double> losses = ParseEpochLosses(out.str());
  ASSERT_EQ(losses.size(), 4u) << out.str();
  EXPECT_LT(losses.back(), losses.front()) << out.str();
  EXPECT_NE(out.str().find("Epoch 4/4 - loss: "), std::string::npos) << out.str();
}

TEST(InProcessClusterTest, ChiefNamesTasksThatNeverRegister) {
  auto ports = PickFreePorts(3);
  ASSERT_TRUE(ports.ok());
  auto address = [&](int i) { return "127.0.0.1:" + std::to_string((*ports)[i]); };
  const std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {address(0)}}, {"ps", {address(1)}}, {"worker", {address(2)}}};
  ChiefOptions chief;
  chief.daemon = OptionsFor(MakeTfConfig(cluster, "chief", 0));
  chief.daemon.register_timeout = absl::Milliseconds(500);
  chief.job_path = "tests/testdata/tiny_synthetic.json";
  ShutdownSignal signal;
  std::ostringstream out;
  // Nothing else runs: the chief must give up, not wait forever.
  EXPECT_EQ(RunChiefTask(chief, &signal, out), 1);
  EXPECT_EQ(out.str(), "");
}

TEST(InProcessClusterTest, WorkerWithoutChiefGivesUpAndNamesIt) {
  auto ports = PickFreePorts(3);
  ASSERT_TRUE(ports.ok());
  auto address = [&](int i) { return "127.0.0.1:" + std::to_string((*ports)[i]); };
  const std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {address(0)}}, {"ps", {address(1)}}, {"worker", {address(2)}}};
  DaemonOptions options = OptionsFor(MakeTfConfig(cluster, "worker", 0));
  options.register_timeout = absl::Milliseconds(500);
  ShutdownSignal signal;
  EXPECT_EQ(RunWorkerTask(options, "cpu", &signal), 1);
  EXPECT_NE(signal.reason().find("chief (" + address(0) + ")"), std::string::npos)
      << signal.reason();
}

}  // namespace
}  // namespace pstrain
