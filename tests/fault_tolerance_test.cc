// Fault injection against the real binaries, as ./demo.sh runs them: 1 chief, 2 ps and
// 2 workers as processes on loopback, the demo's Fashion-MNIST job, the launcher's
// orchestrator restart policy. Each test kills a process at a chosen moment (or corrupts
// a checkpoint file) and asserts that the job still ends with every process exiting 0,
// reaching 0.85 validation accuracy (after 4 epochs: 3 reach it only just; see
// ExpectReachesValAccuracy), and that the
// checkpoint it continued from is the newest one written before the fault (no progress
// before it is lost).

#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint/checkpoint.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "tests/cluster_test_util.h"
#include "tools/psctl_lib.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

bool HaveFashionMnist() {
  struct stat st;
  return stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", &st) == 0;
}

// Short heartbeats and a chief timeout that outlasts a chief restart.
const std::vector<std::string> kTaskArgs = {"--heartbeat_interval=200ms", "--chief_timeout=20s"};

// The demo's job for `epochs` epochs with checkpoints in `checkpoint_dir`, plus `extra`
// chief flags; `fault` (may be null) is injected once.
ProcessRun RunDemoJob(int epochs, const std::string& checkpoint_dir,
                      const std::vector<std::string>& extra, const SignalOnLine* fault) {
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.chief_args = {"--job=examples/fashion_mnist.json", absl::StrCat("--epochs=", epochs),
                        absl::StrCat("--checkpoint_dir=", checkpoint_dir)};
  for (const std::string& arg : extra) options.chief_args.push_back(arg);
  options.task_args = kTaskArgs;
  options.worker_args = {"--device=cpu"};
  ProcessGroup group;
  group.SetRestartPolicy(RestartLikeAnOrchestrator);
  EXPECT_TRUE(StartLocalCluster(options, &group).ok());
  return CollectRun(group, absl::Minutes(8), absl::Seconds(15), fault);
}

// Every process exited 0; `restarted` names the one process restarted once.
void ExpectCleanExits(ProcessRun& run, const std::string& restarted) {
  ASSERT_EQ(run.exits.size(), 5u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
    EXPECT_EQ(exit.signal, 0) << exit.name;
    EXPECT_EQ(exit.restarts, exit.name == restarted ? 1 : 0) << exit.name;
  }
}

// The paths of "checkpoint PATH written (" log lines in `log` before offset `before`.
std::vector<std::string> CheckpointsWritten(const std::string& log, size_t before) {
  std::vector<std::string> paths;
  for (absl::string_view line : absl::StrSplit(log.substr(0, before), '\n')) {
    const size_t at = line.find("checkpoint ");
    const size_t written = line.find(" written (");
    if (at == absl::string_view::npos || written == absl::string_view::npos || written < at) {
      continue;
    }
    paths.push_back(std::string(line.substr(at + 11, written - at - 11)));
  }
  return paths;
}

// The word after `marker` in `log` (a path), or "" when the marker is missing.
std::string WordAfter(const std::string& log, const std::string& marker, size_t* at = nullptr) {
  const size_t found = log.find(marker);
  if (found == std::string::npos) return "";
  if (at != nullptr) *at = found;
  const size_t begin = found + marker.size();
  return log.substr(begin, log.find_first_of(" \n", begin) - begin);
}

int CountOf(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

// A worker killed mid-epoch: the chief notices (its RunSteps is unreachable), gives the
// chunk whose answer never came to the other worker, and the launcher's restart brings
// the worker back, which trains again from the next epoch.
TEST(FaultToleranceTest, AKilledWorkerIsReplacedAndRejoinsAndTheJobCompletes) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = FreshTestDir("worker_kill");
  const SignalOnLine kill_worker{"chief", "written (epoch 1 and", "worker1", SIGKILL, true};
  ProcessRun run = RunDemoJob(4, dir, {"--checkpoint_every_steps=300"}, &kill_worker);
  ASSERT_TRUE(run.signalled) << run.stderr_of["chief"];
  ExpectCleanExits(run, "worker1");
  const std::string& log = run.stderr_of["chief"];
  EXPECT_NE(log.find("worker task 1 (localhost:"), std::string::npos) << log;
  EXPECT_NE(log.find("its shard goes to the others"), std::string::npos) << log;
  // Killed in epoch 2; the restarted worker (it loads the data again) joins when the
  // first segment of training starts after it is ready: after one of epoch 2's mid-epoch
  // checkpoints (every 300 steps), or at the start of epoch 3, or 4 on a loaded machine.
  const std::string rejoined = WordAfter(log, "is back; it trains again from epoch ");
  EXPECT_TRUE(rejoined == "2" || rejoined == "3" || rejoined == "4") << log;
  const std::string& out = run.stdout_of["chief"];
  EXPECT_EQ(ParseEpochLosses(out).size(), 4u) << out;
  // Every sample of each epoch was trained, the killed worker's shard included.
  EXPECT_EQ(CountOf(log, ": 60000 samples in "), 4) << log;
  ExpectReachesValAccuracy(out, 0.85);
}

// The same under bounded staleness and sync: the dead worker's last push is soon more
// than 2 steps behind the survivor, and it never joins another sync aggregate. The ps
// waits for it once (the consistency timeout), not at every step, so the job completes
// (in seconds, where waiting at every step would take the test's whole deadline).
void KillAWorkerMidEpoch(const std::string& name, const std::vector<std::string>& mode) {
  const std::string dir = FreshTestDir(name);
  // Mid-epoch: a worker that died at an epoch's end would be skipped as done with it.
  const SignalOnLine kill_worker{"chief", "written (epoch 1 and", "worker1", SIGKILL, true};
  std::vector<std::string> flags = mode;
  flags.push_back("--checkpoint_every_steps=300");
  ProcessRun run = RunDemoJob(4, dir, flags, &kill_worker);
  ASSERT_TRUE(run.signalled) << run.stderr_of["chief"];
  ExpectCleanExits(run, "worker1");
  const std::string& out = run.stdout_of["chief"];
  EXPECT_EQ(ParseEpochLosses(out).size(), 4u) << out;
  ExpectReachesValAccuracy(out, 0.85);
}

TEST(FaultToleranceTest, AKilledWorkerDoesNotStallBoundedStaleness) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  KillAWorkerMidEpoch("worker_kill_staleness",
                      {"--consistency=bounded_staleness", "--staleness=2"});
}

TEST(FaultToleranceTest, AKilledWorkerDoesNotStallSyncTraining) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  KillAWorkerMidEpoch("worker_kill_sync", {"--consistency=sync"});
}

// Kills ps1 when `kill_ps1` fires: the workers (or the chief's own checkpoint read)
// report it, the chief pauses training, waits for the launcher to bring it back empty,
// restores its shards from the newest checkpoint (mid-epoch ones are written every 300
// steps) and resumes; the job completes.
void KillPs1(const std::string& name, const SignalOnLine& kill_ps1) {
  const std::string dir = FreshTestDir(name);
  ProcessRun run = RunDemoJob(4, dir, {"--checkpoint_every_steps=300"}, &kill_ps1);
  ASSERT_TRUE(run.signalled) << run.stderr_of["chief"];
  ExpectCleanExits(run, "ps1");
  const std::string& log = run.stderr_of["chief"];
  size_t restored_at = 0;
  const std::string restored = WordAfter(log, "came back empty; its shards restored from ",
                                         &restored_at);
  ASSERT_FALSE(restored.empty()) << log;
  const std::vector<std::string> before = CheckpointsWritten(log, restored_at);
  ASSERT_FALSE(before.empty()) << log;
  EXPECT_EQ(restored, before.back()) << log;
  EXPECT_TRUE(log.find("training pauses") != std::string::npos ||
              log.find("; recovering it") != std::string::npos)
      << log;
  EXPECT_EQ(ParseEpochLosses(run.stdout_of["chief"]).size(), 4u) << run.stdout_of["chief"];
  ExpectReachesValAccuracy(run.stdout_of["chief"], 0.85);
}

TEST(FaultToleranceTest, APsKilledMidEpochIsRestoredFromTheLatestCheckpoint) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  // Right after the first mid-epoch checkpoint of epoch 2.
  KillPs1("ps_kill", {"chief", "written (epoch 1 and", "ps1", SIGKILL, /*in_log=*/true});
}

// At an epoch's end: the chief's epoch-end checkpoint read, or the next epoch's first
// push (to a ps that has no variables at all yet), finds it.
TEST(FaultToleranceTest, APsKilledAtAnEpochsEndIsRestoredFromTheLatestCheckpoint) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  KillPs1("ps_kill_epoch_end", {"chief", "Epoch 2/", "ps1", SIGKILL});
}

// The chief SIGKILLed mid-epoch and restarted with the same TF_CONFIG: the ps and workers
// register again, it resumes from the newest checkpoint at its data positions, and the
// step count goes on from that checkpoint's.
TEST(FaultToleranceTest, AKilledChiefIsRestartedAndResumesFromTheLatestCheckpoint) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = FreshTestDir("chief_kill");
  const SignalOnLine kill_chief{"chief", "written (epoch 1 and", "chief", SIGKILL, true};
  // Every checkpoint kept, so the one restored can be read back at the end.
  ProcessRun run = RunDemoJob(4, dir, {"--checkpoint_every_steps=300", "--keep_checkpoints=100"},
                              &kill_chief);
  ASSERT_TRUE(run.signalled) << run.stderr_of["chief"];
  ExpectCleanExits(run, "chief");
  const std::string& log = run.stderr_of["chief"];
  size_t restored_at = 0;
  const std::string restored = WordAfter(log, "restored ", &restored_at);
  ASSERT_FALSE(restored.empty()) << log;
  const std::vector<std::string> before = CheckpointsWritten(log, restored_at);
  ASSERT_FALSE(before.empty()) << log;
  EXPECT_EQ(restored, before.back()) << log;
  EXPECT_NE(log.find("from its saved data positions", restored_at), std::string::npos) << log;
  for (const std::string task : {"ps0", "ps1", "worker0", "worker1"}) {
    EXPECT_NE(run.stderr_of[task].find("registered again with chief"), std::string::npos)
        << task << ": " << run.stderr_of[task];
  }
  // Epoch 1 was printed by the first chief, epochs 2 to 4 by the second.
  const std::string& out = run.stdout_of["chief"];
  for (const char* epoch : {"Epoch 1/4", "Epoch 2/4", "Epoch 3/4", "Epoch 4/4"}) {
    EXPECT_EQ(CountOf(out, epoch), 1) << epoch << "\n" << out;
  }
  ExpectReachesValAccuracy(out, 0.85);
  // The step count continued from the restored checkpoint's.
  absl::StatusOr<std::unique_ptr<CheckpointReader>> first = CheckpointReader::Open(restored);
  absl::StatusOr<std::unique_ptr<CheckpointReader>> last = CheckpointReader::Open(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(last.ok()) << last.status();
  // The restored checkpoint was the mid-epoch one of epoch 2, and the new chief went on
  // from its step: the final step is past it.
  EXPECT_EQ((*first)->epoch(), 1);
  EXPECT_GT((*first)->step(), 938);
  EXPECT_GT((*last)->step(), (*first)->step());
  EXPECT_EQ((*last)->epoch(), 4);
  // A full 4 epochs of 938 global steps each, the chunks in flight at the kill run again.
  EXPECT_GE((*last)->step(), 4 * 938);
}

// The chief SIGKILLed while it writes a checkpoint (files written, not yet committed):
// the previous checkpoint is intact, the restarted chief loads it, and the job completes.
TEST(FaultToleranceTest, AChiefKilledWhileWritingACheckpointLeavesThePreviousOneToRestore) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = FreshTestDir("chief_kill_in_write");
  // The second checkpoint (the end of epoch 2) is the one interrupted.
  SignalOnLine kill_chief{"chief", "writing checkpoint", "chief", SIGKILL, true};
  kill_chief.occurrence = 2;
  ProcessRun run =
      RunDemoJob(4, dir, {"--testing_checkpoint_commit_delay=2s"}, &kill_chief);
  ASSERT_TRUE(run.signalled) << run.stderr_of["chief"];
  ExpectCleanExits(run, "chief");
  const std::string& log = run.stderr_of["chief"];
  size_t restored_at = 0;
  const std::string restored = WordAfter(log, "restored ", &restored_at);
  const std::vector<std::string> before = CheckpointsWritten(log, restored_at);
  ASSERT_EQ(before.size(), 1u) << log;  // only epoch 1's was committed
  EXPECT_EQ(restored, before[0]) << log;
  EXPECT_NE(log.find("(epoch 1, step", restored_at), std::string::npos) << log;
  const std::string& out = run.stdout_of["chief"];
  EXPECT_EQ(CountOf(out, "Epoch 4/4"), 1) << out;
  ExpectReachesValAccuracy(out, 0.85);
  // The interrupted write left no half checkpoint behind once a later one succeeded.
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_FALSE(absl::StartsWith(entry.path().filename().string(), ".tmp-")) << entry.path();
  }
}

// A bit flipped in the newest checkpoint's tensor data: the next run reports it in one
// line, restores the previous checkpoint instead, and trains on to the end.
TEST(FaultToleranceTest, ACorruptedTensorFileFallsBackToThePreviousCheckpoint) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = FreshTestDir("corrupt");
  ProcessRun first = RunDemoJob(2, dir, {}, nullptr);
  ExpectCleanExits(first, "");
  const std::vector<std::string> written =
      CheckpointsWritten(first.stderr_of["chief"], std::string::npos);
  ASSERT_EQ(written.size(), 2u) << first.stderr_of["chief"];
  {
    const std::string data = written[1] + "/data-00000";
    std::fstream file(data, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file.good()) << data;
    file.seekg(1000);
    char byte = 0;
    file.read(&byte, 1);
    byte ^= 0x10;
    file.seekp(1000);
    file.write(&byte, 1);
  }
  ProcessRun second = RunDemoJob(4, dir, {}, nullptr);
  ExpectCleanExits(second, "");
  const std::string& log = second.stderr_of["chief"];
  // One line names the bad checkpoint; the previous one is restored.
  int reports = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, written[1]) && absl::StartsWith(line, "E ")) ++reports;
  }
  EXPECT_EQ(reports, 1) << log;
  EXPECT_EQ(WordAfter(log, "restored "), written[0]) << log;
  const std::string& out = second.stdout_of["chief"];
  EXPECT_EQ(CountOf(out, "Epoch 1/4"), 0) << out;
  for (const char* epoch : {"Epoch 2/4", "Epoch 3/4", "Epoch 4/4"}) {
    EXPECT_EQ(CountOf(out, epoch), 1) << epoch << "\n" << out;
  }
  ExpectReachesValAccuracy(out, 0.85);
}

// `psctl checkpoint` against the running chief writes a checkpoint on demand and prints
// where; after the job the chief is gone and psctl names it.
TEST(FaultToleranceTest, PsctlCheckpointWritesOneOnDemand) {
  const std::string dir = FreshTestDir("on_demand");
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json", "--epochs=30",
                        "--steps_per_call=2", "--checkpoint_every_epoch=false",
                        "--keep_checkpoints=50", absl::StrCat("--checkpoint_dir=", dir)};
  options.task_args = kTaskArgs;
  ProcessGroup group;
  ASSERT_TRUE(StartLocalCluster(options, &group).ok());
  std::string chief_port;
  std::string chief_log, chief_out;
  std::thread asker;
  int psctl_code = -1;
  std::string psctl_out, psctl_err;
  auto exits = group.Wait(
      absl::Minutes(4), absl::Seconds(10),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        if (name != "chief") return;
        (is_stderr ? chief_log : chief_out) += line + "\n";
        if (is_stderr && chief_port.empty() && absl::StrContains(line, "serving on port ")) {
          chief_port = WordAfter(line, "serving on port ");
          if (!chief_port.empty() && chief_port.back() == ';') chief_port.pop_back();
        }
        // Asked from another thread: the group's output must keep being read meanwhile.
        if (!is_stderr && absl::StartsWith(line, "Epoch 3/") && !asker.joinable()) {
          asker = std::thread([&, port = chief_port] {
            std::ostringstream out, err;
            psctl_code = RunPsctl({"checkpoint", "--chief=localhost:" + port}, out, err);
            psctl_out = out.str();
            psctl_err = err.str();
          });
        }
      },
      nullptr);
  if (asker.joinable()) asker.join();
  for (const auto& exit : exits) EXPECT_EQ(exit.exit_code, 0) << exit.name << "\n" << chief_log;
  ASSERT_EQ(psctl_code, kPsctlOk) << psctl_err << chief_log;
  const std::string path = WordAfter(psctl_out, "checkpoint ");
  ASSERT_FALSE(path.empty()) << psctl_out;
  absl::StatusOr<std::unique_ptr<CheckpointReader>> saved = CheckpointReader::Open(path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_NE(chief_log.find("written on request"), std::string::npos) << chief_log;
  // Not at an epoch end (those are off): only the on-demand one and the final one exist.
  EXPECT_EQ(CheckpointsWritten(chief_log, std::string::npos).size(), 2u) << chief_log;
  EXPECT_LT((*saved)->epoch(), 30);
  // The job is over and the chief gone: psctl names it and fails.
  std::ostringstream out, err;
  EXPECT_EQ(RunPsctl({"checkpoint", "--chief=localhost:" + chief_port, "--timeout=2s"}, out, err),
            kPsctlUnreachable);
  EXPECT_NE(err.str().find("chief at localhost:" + chief_port), std::string::npos) << err.str();
}

}  // namespace
}  // namespace pstrain
