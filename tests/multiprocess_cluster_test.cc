// The three real binaries as separate processes on loopback, configured only by
// TF_CONFIG, as ./demo.sh runs them.

#include <signal.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "tests/cluster_test_util.h"
#include "tests/ps_final_status.h"

namespace pstrain {
namespace {

// Fast failure detection for tests; the defaults suit real clusters.
const std::vector<std::string> kQuickTimeouts = {"--heartbeat_interval=200ms",
                                                 "--chief_timeout=10s"};

// The chief's RPC deadline in the lost-worker tests: 10 s (times SanitizerSlowdown()),
// which no healthy answer on a loaded machine comes near.
std::string RpcTimeoutFlag() {
  return absl::StrCat("--rpc_timeout=", absl::FormatDuration(ScaledForSanitizers(absl::Seconds(10))));
}

// psctl's output read back as a user's script would: one row of whitespace-separated
// fields per line.
struct PsctlRun {
  int exit_code = -1;
  std::string out;
  std::vector<std::vector<std::string>> rows;
};

PsctlRun RunPsctl(const std::string& args) {
  PsctlRun run;
  FILE* pipe = ::popen(("tools/psctl " + args + " --timeout=10s 2>&1").c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.out.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  for (absl::string_view line : absl::StrSplit(run.out, '\n', absl::SkipEmpty())) {
    run.rows.push_back(absl::StrSplit(line, ' ', absl::SkipEmpty()));
  }
  return run;
}

// The number after "`label`: " on a line of `text` (-1 when missing).
int64_t NumberAfter(const std::string& text, const std::string& label) {
  const size_t at = text.find(label + ": ");
  int64_t n = -1;
  if (at == std::string::npos) return n;
  const size_t begin = at + label.size() + 2;
  if (!absl::SimpleAtoi(text.substr(begin, text.find('\n', begin) - begin), &n)) return -1;
  return n;
}

// The tiny job's variables (a 784-64-10 network) and their shapes as psctl prints them.
const std::map<std::string, std::string> kTinyVariables = {{"dense/kernel", "[784,64]"},
                                                           {"dense/bias", "[64]"},
                                                           {"dense_1/kernel", "[64,10]"},
                                                           {"dense_1/bias", "[10]"}};

// What psctl shows of the job while it trains (read at the end of epoch 1, with both
// workers stopped so the job waits for them): the chief's status and layout, then each ps
// that the status names, whose variables must be those the layout puts on it.
void CheckPsctlAgainstTheRunningJob(const std::string& chief, std::string* report) {
  PsctlRun status = RunPsctl("status --chief=" + chief);
  ASSERT_EQ(status.exit_code, 0) << status.out;
  EXPECT_NE(status.out.find("phase: training\n"), std::string::npos) << status.out;
  const int64_t epoch = NumberAfter(status.out, "epoch");
  EXPECT_GE(epoch, 1) << status.out;
  EXPECT_LE(epoch, 4) << status.out;
  EXPECT_GE(NumberAfter(status.out, "global step"), 14) << status.out;  // epoch 1 is done
  std::map<int, std::string> ps_address;
  int workers = 0;
  bool chief_memory = false;
  for (const auto& row : status.rows) {
    // type, index, address, registered, "Nms ago", memory, peak memory: every task's
    // memory as the kernel counts it, never unknown in a running job.
    if (row.size() == 7 && row[0] == "chief") {
      chief_memory = absl::EndsWith(row[6], "MiB") && row[6] != "0.0MiB";
    }
    if (row.size() < 4 || (row[0] != "ps" && row[0] != "worker")) continue;
    EXPECT_EQ(row.size(), 8u) << absl::StrJoin(row, " ");
    if (row.size() == 8) {
      EXPECT_TRUE(absl::EndsWith(row[6], "MiB") && absl::EndsWith(row[7], "MiB"))
          << "no memory: " << absl::StrJoin(row, " ");
    }
    EXPECT_EQ(row[3], "yes") << "not registered: " << absl::StrJoin(row, " ");
    EXPECT_TRUE(absl::StartsWith(row[2], "localhost:")) << absl::StrJoin(row, " ");
    int index = -1;
    EXPECT_TRUE(absl::SimpleAtoi(row[1], &index)) << absl::StrJoin(row, " ");
    if (row[0] == "ps") ps_address[index] = row[2];
    if (row[0] == "worker") ++workers;
  }
  EXPECT_EQ(workers, 2) << status.out;
  EXPECT_TRUE(chief_memory) << status.out;
  ASSERT_EQ(ps_address.size(), 2u) << status.out;

  // layout: variable, shard, ps, rows, shape; whole variables here (each < 256 KiB).
  PsctlRun layout = RunPsctl("layout --chief=" + chief);
  ASSERT_EQ(layout.exit_code, 0) << layout.out;
  std::map<int, std::set<std::string>> placed;
  std::map<std::string, std::string> shapes;
  for (const auto& row : layout.rows) {
    ASSERT_EQ(row.size(), 5u) << layout.out;
    if (row[0] == "variable") continue;
    EXPECT_EQ(row[1], row[0]) << "split: " << layout.out;
    int on = -1;
    EXPECT_TRUE(absl::SimpleAtoi(row[2], &on)) << layout.out;
    placed[on].insert(row[0]);
    shapes[row[0]] = row[4];
  }
  EXPECT_EQ(shapes, kTinyVariables) << layout.out;
  EXPECT_EQ(placed.size(), 2u) << "both ps hold variables: " << layout.out;

  // ps, at each address the status gave: the variables the layout put there, trained.
  for (const auto& [index, address] : ps_address) {
    PsctlRun ps = RunPsctl("ps --address=" + address);
    ASSERT_EQ(ps.exit_code, 0) << ps.out;
    ASSERT_FALSE(ps.rows.empty());
    // "ps ADDRESS: optimizer adam, P pushes, Q pulls, V variables"
    EXPECT_EQ(absl::StrJoin(ps.rows[0], " ").rfind("ps " + address + ": optimizer adam, ", 0), 0u)
        << ps.out;
    std::set<std::string> held;
    for (const auto& row : ps.rows) {
      if (row.size() != 3 || !kTinyVariables.count(row[0])) continue;
      held.insert(row[0]);
      EXPECT_EQ(row[1], kTinyVariables.at(row[0])) << ps.out;
      int64_t version = 0;
      EXPECT_TRUE(absl::SimpleAtoi(row[2], &version)) << ps.out;
      EXPECT_GE(version, 14) << "every step of epoch 1 pushed to it: " << ps.out;
    }
    EXPECT_EQ(held, placed[index]) << ps.out << layout.out;
  }
  *report = status.out + layout.out;
}

TEST(MultiprocessClusterTest, FiveProcessesTrainAndExitCleanly) {
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json", "--steps_per_call=4"};
  options.task_args = kQuickTimeouts;
  // 0.1 s a step (more under a sanitizer): after "Epoch 1/" the job has at least 21 steps
  // of both workers, over 2 s, to go, and this test stops the workers within
  // milliseconds of reading that line. While psctl looks (its runs take seconds on a
  // loaded machine) the job waits for them, its chief and ps tasks answering.
  options.worker_args = {
      absl::StrCat("--testing_step_delay=", 100 * SanitizerSlowdown(), "ms")};
  ProcessGroup group;
  ASSERT_TRUE(StartLocalCluster(options, &group).ok());
  std::string chief_port, psctl_report;
  bool looked = false;
  ProcessRun run;
  run.exits = group.Wait(
      ScaledForSanitizers(absl::Minutes(3)), absl::Seconds(10),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        if (name != "chief") return;
        if (is_stderr && chief_port.empty() && absl::StrContains(line, "serving on port ")) {
          const size_t at = line.find("serving on port ") + 16;
          chief_port = line.substr(at, line.find_first_not_of("0123456789", at) - at);
        }
        if (!is_stderr && !looked && absl::StartsWith(line, "Epoch 1/")) {
          looked = true;
          for (const char* worker : {"worker0", "worker1"}) {
            EXPECT_TRUE(group.Signal(worker, SIGSTOP).ok()) << worker;
          }
          CheckPsctlAgainstTheRunningJob("localhost:" + chief_port, &psctl_report);
          for (const char* worker : {"worker0", "worker1"}) {
            EXPECT_TRUE(group.Signal(worker, SIGCONT).ok()) << worker;
          }
        }
      },
      nullptr);
  ASSERT_TRUE(looked);
  ASSERT_EQ(run.exits.size(), 5u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  const std::vector<double> losses = ParseEpochLosses(run.stdout_of["chief"]);
  ASSERT_EQ(losses.size(), 4u) << run.stdout_of["chief"];
  EXPECT_LT(losses.back(), losses.front()) << run.stdout_of["chief"];
  // fit.batch_size (32) is each worker's batch here, said at start.
  EXPECT_EQ(run.stdout_of["chief"].rfind(
                "pstrain: parameter_server strategy, batch 32 per worker (64 per round of 2 "
                "workers)\n",
                0),
            0u)
      << run.stdout_of["chief"];
  // Asynchronous training, by each ps's own final account: every push was applied at
  // once, one version per push of every variable it holds; 2 shards of 7 steps in each
  // of 4 epochs (200 examples a shard in per-worker batches of 32, not 16); each worker's pushes named, the latest at epoch 4's last step.
  for (int i = 0; i < 2; ++i) {
    const std::string& log = run.stderr_of[absl::StrCat("ps", i)];
    const std::map<int, PsStatusResponse> final_status = FinalPsStatuses(log);
    ASSERT_EQ(final_status.count(i), 1u) << log;
    const PsStatusResponse& ps = final_status.at(i);
    EXPECT_EQ(ps.consistency_mode(), CONSISTENCY_ASYNC);
    EXPECT_EQ(ps.pushes(), 4 * 2 * 7) << ps.DebugString();
    EXPECT_GT(ps.variables_size(), 0);
    for (const VariableInfo& v : ps.variables()) EXPECT_EQ(v.version(), ps.pushes()) << v.name();
    ASSERT_EQ(ps.workers_size(), 2) << ps.DebugString();
    EXPECT_EQ(ps.workers(0).worker(), "worker 0");
    EXPECT_EQ(ps.workers(1).worker(), "worker 1");
    EXPECT_EQ(ps.workers(0).pushes() + ps.workers(1).pushes(), ps.pushes());
    EXPECT_EQ(std::max(ps.workers(0).step(), ps.workers(1).step()), 6) << ps.DebugString();
    EXPECT_EQ(ps.workers(0).epoch(), 3);
    EXPECT_EQ(ps.workers(1).epoch(), 3);
  }
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
  // The chief's calls to the dead worker are refused at once (nothing listens on its
  // port); the deadline only bounds the healthy tasks' answers on a loaded machine.
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json", "--epochs=30",
                        "--steps_per_call=2", RpcTimeoutFlag()};
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
  // The chunk worker1 never answered ran again once, on worker0, and every step of the job
  // (30 epochs of 14) was answered once: worker1 only answered some of the first two.
  const std::vector<std::string> lost = LinesWith(err["chief"], " lost: ");
  const std::vector<std::string> again = LinesWith(err["chief"], " did not answer ran again on ");
  ASSERT_EQ(lost.size(), 1u) << err["chief"];
  ASSERT_EQ(again.size(), 1u) << err["chief"];
  EXPECT_TRUE(absl::StrContains(again[0], "that worker task 1 (")) << again[0];
  EXPECT_TRUE(absl::StrContains(again[0], "ran again on worker task 0 (")) << again[0];
  const std::vector<int64_t> per_worker = StepsPerWorker(err["chief"]);
  ASSERT_EQ(per_worker.size(), 2u) << err["chief"];
  EXPECT_EQ(per_worker[0] + per_worker[1], 30 * 14) << err["chief"];
  EXPECT_GE(per_worker[0], 28 * 14) << err["chief"];
}

// As ./demo.sh runs it: the launcher's orchestrator policy restarts the killed worker with
// the same TF_CONFIG; it registers again (a new incarnation), the chief gives it work from
// the next epoch, and at the end every process, the restarted one too, exits 0.
TEST(MultiprocessClusterTest, AKilledWorkerIsRestartedAndRejoins) {
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json", "--epochs=40",
                        "--steps_per_call=2", RpcTimeoutFlag()};
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
