// The three real binaries as separate processes on loopback, configured only by
// TF_CONFIG, as ./demo.sh runs them.

#include <signal.h>

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

// Fast failure detection for tests; the defaults suit real clusters.
const std::vector<std::string> kQuickTimeouts = {"--heartbeat_interval=200ms",
                                                 "--chief_timeout=10s"};

TEST(MultiprocessClusterTest, FiveProcessesTrainAndExitCleanly) {
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json", "--steps_per_call=4"};
  options.task_args = kQuickTimeouts;
  ProcessGroup group;
  ASSERT_TRUE(StartLocalCluster(options, &group).ok());
  ProcessRun run = CollectRun(group, absl::Minutes(3), absl::Seconds(10));
  ASSERT_EQ(run.exits.size(), 5u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  const std::vector<double> losses = ParseEpochLosses(run.stdout_of["chief"]);
  ASSERT_EQ(losses.size(), 4u) << run.stdout_of["chief"];
  EXPECT_LT(losses.back(), losses.front()) << run.stdout_of["chief"];
  // Both ps tasks held variables and both workers trained.
  EXPECT_NE(run.stderr_of["chief"].find("on ps 1"), std::string::npos) << run.stderr_of["chief"];
}

TEST(MultiprocessClusterTest, MalformedTfConfigIsOneLineAndExitCode2) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "TF_CONFIG"},
      {R"({"cluster":{"worker":["localhost:1"]},"task":{"type":"worker","index":3}})", "index 3"},
      {R"({"cluster":{"worker":["localhost:1"]},"task":{"type":"ps","index":0}})", "ps"},
  };
  for (const std::string binary : {"ps_server/ps_server", "worker/worker", "chief/chief"}) {
    for (const auto& [tf_config, expected] : cases) {
      ProcessGroup group;
      ASSERT_TRUE(group.Start({"task", binary, {}, {{"TF_CONFIG", tf_config}}}).ok());
      ProcessRun run = CollectRun(group, absl::Seconds(30), absl::Seconds(10));
      EXPECT_EQ(run.exits[0].exit_code, 2) << binary << " " << tf_config;
      const std::string& err = run.stderr_of["task"];
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << binary << ": " << err;
      EXPECT_NE(err.find(expected), std::string::npos) << binary << ": " << err;
    }
  }
  // A missing TF_CONFIG is named too.
  ProcessGroup group;
  ASSERT_TRUE(group.Start({"task", "worker/worker", {}, {{"TF_CONFIG", ""}}}).ok());
  ProcessRun run = CollectRun(group, absl::Seconds(30), absl::Seconds(10));
  EXPECT_EQ(run.exits[0].exit_code, 2);
}

TEST(MultiprocessClusterTest, ClusterWithoutChiefIsAConfigError) {
  // Parameter-server tasks need a chief to coordinate them: a spec without one is as wrong
  // as a malformed TF_CONFIG, so the same exit code 2 and one line naming it.
  for (const std::string type : {"ps", "worker"}) {
    const std::string binary = type == "ps" ? "ps_server/ps_server" : "worker/worker";
    const std::string tf_config =
        R"({"cluster":{"ps":["localhost:1"],"worker":["localhost:2"]},"task":{"type":")" + type +
        R"(","index":0}})";
    ProcessGroup group;
    ASSERT_TRUE(group.Start({"task", binary, {}, {{"TF_CONFIG", tf_config}}}).ok());
    ProcessRun run = CollectRun(group, absl::Seconds(30), absl::Seconds(10));
    EXPECT_EQ(run.exits[0].exit_code, 2) << binary << "\n" << run.stderr_of["task"];
    EXPECT_NE(run.stderr_of["task"].find("no chief"), std::string::npos) << run.stderr_of["task"];
    // One error line (an informational line about the device may come before it).
    int error_lines = 0;
    for (absl::string_view line : absl::StrSplit(run.stderr_of["task"], '\n')) {
      error_lines += absl::StartsWith(line, "E ") ? 1 : 0;
    }
    EXPECT_EQ(error_lines, 1) << run.stderr_of["task"];
  }
}

TEST(MultiprocessClusterTest, ChiefNamesTheWorkerThatNeverCame) {
  auto ports = PickFreePorts(4);
  ASSERT_TRUE(ports.ok());
  auto address = [&](int i) { return "localhost:" + std::to_string((*ports)[i]); };
  const std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {address(0)}}, {"ps", {address(1)}}, {"worker", {address(2), address(3)}}};
  ProcessGroup group;
  std::vector<std::string> args = kQuickTimeouts;
  args.push_back("--register_timeout=3s");
  ASSERT_TRUE(group.Start({"ps0", "ps_server/ps_server", args,
                           {{"TF_CONFIG", MakeTfConfig(cluster, "ps", 0)}}}).ok());
  ASSERT_TRUE(group.Start({"worker0", "worker/worker", args,
                           {{"TF_CONFIG", MakeTfConfig(cluster, "worker", 0)}}}).ok());
  std::vector<std::string> chief_args = args;
  chief_args.push_back("--job=tests/testdata/tiny_synthetic.json");
  ASSERT_TRUE(group.Start({"chief", "chief/chief", chief_args,
                           {{"TF_CONFIG", MakeTfConfig(cluster, "chief", 0)}}}).ok());
  ProcessRun run = CollectRun(group, absl::Minutes(2), absl::Seconds(10));
  // The chief fails naming worker 1; the tasks that did come are told to stop and exit.
  EXPECT_EQ(run.exits[2].exit_code, 1);
  EXPECT_NE(run.stderr_of["chief"].find("worker 1 (" + address(3) + ")"), std::string::npos)
      << run.stderr_of["chief"];
  EXPECT_EQ(run.exits[0].signal, 0) << run.stderr_of["ps0"];
  EXPECT_EQ(run.exits[1].signal, 0) << run.stderr_of["worker0"];
}

TEST(MultiprocessClusterTest, TasksExitWhenTheChiefDies) {
  LocalClusterOptions options;
  options.bin_dir = ".";
  // A long job, so the chief is surely still training when it is killed.
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json", "--epochs=100000"};
  options.task_args = {"--heartbeat_interval=200ms", "--chief_timeout=2s"};
  ProcessGroup group;
  ASSERT_TRUE(StartLocalCluster(options, &group).ok());
  const SignalOnLine kill_chief{"chief", "Epoch 2/", "chief", SIGKILL};
  ProcessRun run = CollectRun(group, absl::Minutes(2), absl::Minutes(2), &kill_chief);
  ASSERT_TRUE(run.signalled);
  // Nobody lingers: every ps and worker notices and exits by itself, naming the chief.
  for (const auto& exit : run.exits) {
    if (exit.name == "chief") {
      EXPECT_EQ(exit.signal, SIGKILL);
    } else {
      EXPECT_EQ(exit.signal, 0) << exit.name << " had to be killed";
      EXPECT_EQ(exit.exit_code, 1) << exit.name;
    }
  }
}

const SignalOnLine kKillWorker1AtEpoch2{"chief", "Epoch 2/", "worker1", SIGKILL};

TEST(MultiprocessClusterTest, AWorkerKilledMidJobDoesNotFailIt) {
  LocalClusterOptions options;
  options.bin_dir = ".";
  // A short RPC deadline so the chief notices the dead worker at once.
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json", "--epochs=30",
                        "--steps_per_call=2", "--rpc_timeout=3s"};
  options.task_args = kQuickTimeouts;
  ProcessGroup group;
  ASSERT_TRUE(StartLocalCluster(options, &group).ok());
  // A long grace: worker1's death must not make the group stop the others.
  ProcessRun run = CollectRun(group, absl::Minutes(4), absl::Minutes(3), &kKillWorker1AtEpoch2);
  ASSERT_TRUE(run.signalled);
  auto& out = run.stdout_of;
  auto& err = run.stderr_of;
  ASSERT_EQ(run.exits.size(), 5u);
  for (const auto& exit : run.exits) {
    if (exit.name == "worker1") {
      EXPECT_EQ(exit.signal, SIGKILL) << DescribeExit(exit);
    } else {
      EXPECT_EQ(exit.signal, 0) << exit.name << " " << DescribeExit(exit) << "\n" << err[exit.name];
      EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                   << err[exit.name];
    }
  }
  // Every epoch ran to the end on worker0 alone, worker1's shard included.
  EXPECT_EQ(ParseEpochLosses(out["chief"]).size(), 30u) << out["chief"] << err["chief"];
  EXPECT_NE(out["chief"].find("Epoch 30/30"), std::string::npos) << out["chief"];
  EXPECT_NE(err["chief"].find("worker task 1 ("), std::string::npos) << err["chief"];
  EXPECT_NE(err["chief"].find(" lost: "), std::string::npos) << err["chief"];
  EXPECT_NE(err["chief"].find("its shard goes to the others"), std::string::npos) << err["chief"];
}

// As ./demo.sh runs it: the launcher's orchestrator policy restarts the killed worker with
// the same TF_CONFIG; it registers again (a new incarnation), the chief gives it work from
// the next epoch, and at the end every process, the restarted one too, exits 0.
TEST(MultiprocessClusterTest, AKilledWorkerIsRestartedAndRejoins) {
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json", "--epochs=40",
                        "--steps_per_call=2", "--rpc_timeout=3s"};
  options.task_args = kQuickTimeouts;
  ProcessGroup group;
  group.SetRestartPolicy(RestartLikeAnOrchestrator);
  ASSERT_TRUE(StartLocalCluster(options, &group).ok());
  ProcessRun run = CollectRun(group, absl::Minutes(4), absl::Seconds(30), &kKillWorker1AtEpoch2);
  ASSERT_TRUE(run.signalled);
  auto& out = run.stdout_of;
  auto& err = run.stderr_of;
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << err[exit.name];
    EXPECT_EQ(exit.restarts, exit.name == "worker1" ? 1 : 0) << exit.name;
  }
  EXPECT_EQ(ParseEpochLosses(out["chief"]).size(), 40u) << out["chief"] << err["chief"];
  EXPECT_NE(err["chief"].find("worker task 1 ("), std::string::npos) << err["chief"];
  EXPECT_NE(err["chief"].find(" is back"), std::string::npos) << err["chief"];
}

}  // namespace
}  // namespace pstrain
