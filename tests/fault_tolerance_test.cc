// Fault injection against the real binaries, as ./demo.sh runs them: 1 chief, 2 ps and
// 2 workers as processes on loopback, the launcher's orchestrator restart policy, on the
// tiny job (tests/testdata/tiny_synthetic.json: 400 samples, 7 steps of each worker's
// shard an epoch, 14 global steps) with 50 ms steps. Each test kills a process at a
// chosen moment (or corrupts a checkpoint file) and checks exactly what the fault must not
// change: every process exits 0, every epoch trains all 400 samples and the job's step
// count comes out whole, the checkpoint it continued from is the newest one written before
// the fault (no progress before it is lost). Accuracy
// on Fashion-MNIST is checked where it is the claim (fashion_mnist_cluster_test), not here.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
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
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"
#include "tests/ps_final_status.h"
#include "tools/psctl_lib.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

// Short heartbeats and a chief timeout that outlasts a chief restart.
const std::vector<std::string> kTaskArgs = {"--heartbeat_interval=200ms", "--chief_timeout=20s"};

// The tiny job's figures: global steps of an epoch (2 shards of 7 steps); with
// --checkpoint_every_steps=kCheckpointEverySteps a checkpoint also comes 7 steps after
// each epoch's end, in the middle of the next epoch (the first at step 21).
constexpr int64_t kStepsPerEpoch = 14;
constexpr int64_t kCheckpointEverySteps = 7;

// One thing a test does when a line appears: when `reporter` writes a line containing
// `text` (on stderr, its log, if `in_log`; else stdout), `action` runs on the group.
// Steps fire in order, each on a line after the one that fired the step before.
struct Step {
  std::string reporter;
  bool in_log = true;
  std::string text;
  std::function<void(ProcessGroup&)> action;
};

struct Script {
  std::vector<Step> steps;
  size_t fired = 0;  // steps done
};

// Sends `signal` to each of `names`.
std::function<void(ProcessGroup&)> Send(int signal, std::vector<std::string> names) {
  return [signal, names](ProcessGroup& group) {
    for (const std::string& name : names) EXPECT_TRUE(group.Signal(name, signal).ok()) << name;
  };
}

// The tiny job for `epochs` epochs with checkpoints in `checkpoint_dir`, plus `extra`
// chief flags, running `script` (may be null) on its lines; `num_ps` ps given `ps_args`
// (sharded checkpoints: --checkpoint_dir).
ProcessRun RunTinyJob(int epochs, const std::string& checkpoint_dir,
                      const std::vector<std::string>& extra, Script* script,
                      const std::vector<std::string>& ps_args = {}, int num_ps = 2) {
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.num_ps = num_ps;
  options.ps_args = ps_args;
  options.chief_args = {"--job=tests/testdata/tiny_synthetic.json",
                        absl::StrCat("--epochs=", epochs), "--steps_per_call=2",
                        absl::StrCat("--checkpoint_dir=", checkpoint_dir)};
  for (const std::string& arg : extra) options.chief_args.push_back(arg);
  options.task_args = kTaskArgs;
  // 50 ms steps: an epoch is 7 rounds of both workers, a third of a second at least, so a
  // fault sent on a line (within milliseconds of it) lands in the epoch the line is of.
  options.worker_args = {"--device=cpu", "--testing_step_delay=50ms"};
  ProcessGroup group;
  group.SetRestartPolicy(RestartLikeAnOrchestrator);
  EXPECT_TRUE(StartLocalCluster(options, &group).ok());
  ProcessRun run;
  run.exits = group.Wait(
      ScaledForSanitizers(absl::Minutes(4)), absl::Seconds(15),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        if (script == nullptr || script->fired == script->steps.size()) return;
        const Step& step = script->steps[script->fired];
        if (name == step.reporter && is_stderr == step.in_log &&
            absl::StrContains(line, step.text)) {
          ++script->fired;
          step.action(group);
        }
      },
      nullptr);
  if (script != nullptr) {
    EXPECT_EQ(script->fired, script->steps.size())
        << "step " << script->fired << " never fired\n" << run.stderr_of["chief"];
  }
  return run;
}

// The job trained every sample of each of the `epochs_in_log` epochs its chief(s) reported
// (the chunks whose answers never came run again) and printed its line, and its last checkpoint
// in `dir` is of epoch `epochs` at the last global step, no step missing or counted twice.
void ExpectEveryEpochWhole(const ProcessRun& run, const std::string& dir, int epochs,
                           int epochs_in_log) {
  const std::string& log = run.stderr_of.at("chief");
  const std::string& out = run.stdout_of.at("chief");
  int whole = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, ": 400 samples in ")) ++whole;
  }
  EXPECT_EQ(whole, epochs_in_log) << log;
  EXPECT_EQ(static_cast<int>(ParseEpochLosses(out).size()), epochs_in_log) << out;
  absl::StatusOr<std::unique_ptr<CheckpointReader>> last = CheckpointReader::Open(dir);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ((*last)->epoch(), epochs);
  EXPECT_EQ((*last)->step(), epochs * kStepsPerEpoch) << log;
}

// Every process exited 0; `restarted` names the one process restarted once.
void ExpectCleanExits(ProcessRun& run, const std::string& restarted, size_t processes = 5) {
  ASSERT_EQ(run.exits.size(), processes);
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

// A worker killed mid-epoch (7 steps into epoch 2, right after a checkpoint): the chief
// notices (its RunSteps is unreachable), gives the chunk whose answer never came to the
// other worker, and the launcher's restart brings the worker back, which trains again from
// a later segment. The other worker is held (SIGSTOP) from the kill until the restarted
// one has its job, so the job cannot end before it is back, however slow its start.
TEST(FaultToleranceTest, AKilledWorkerIsReplacedAndRejoinsAndTheJobCompletes) {
  const std::string dir = FreshTestDir("worker_kill");
  Script script;
  script.steps = {{"chief", true, "written (epoch 1 and",
                   [](ProcessGroup& group) {
                     Send(SIGKILL, {"worker1"})(group);
                     Send(SIGSTOP, {"worker0"})(group);
                   }},
                  {"worker1", true, "job received", Send(SIGCONT, {"worker0"})}};
  ProcessRun run = RunTinyJob(4, dir, {absl::StrCat("--checkpoint_every_steps=", kCheckpointEverySteps)},
                              &script);
  ExpectCleanExits(run, "worker1");
  const std::string& log = run.stderr_of["chief"];
  EXPECT_NE(log.find("worker task 1 (localhost:"), std::string::npos) << log;
  EXPECT_NE(log.find("its shard goes to the others"), std::string::npos) << log;
  // Killed in epoch 2; back when a segment starts after it is ready: after a mid-epoch
  // checkpoint of epoch 2 or 3, or at the start of epoch 3 or 4.
  const std::string rejoined = WordAfter(log, "is back; it trains again from epoch ");
  EXPECT_TRUE(rejoined == "2" || rejoined == "3" || rejoined == "4") << log;
  EXPECT_EQ(ParseEpochLosses(run.stdout_of["chief"]).size(), 4u) << run.stdout_of["chief"];
  ExpectEveryEpochWhole(run, dir, 4, 4);
  // The chunk worker1 was killed in ran again once (on whichever worker took its shard
  // first: worker0, or worker1 itself once back), and each step was answered once.
  const std::vector<std::string> again = LinesWith(log, " did not answer ran again on ");
  ASSERT_EQ(again.size(), 1u) << log;
  EXPECT_TRUE(absl::StrContains(again[0], "that worker task 1 (")) << again[0];
  const std::vector<int64_t> per_worker = StepsPerWorker(log);
  ASSERT_EQ(per_worker.size(), 2u) << log;
  EXPECT_EQ(per_worker[0] + per_worker[1], 4 * kStepsPerEpoch) << log;
}

// The same under bounded staleness and sync (the job's consistency, with a 2 s timeout):
// the dead worker's last push is soon more than 2 steps behind the survivor, and it never
// joins another sync aggregate. Each ps waits for it once, not at every one of the steps
// still to go, as its own final count of timed-out waits says: at most `max_timeouts`.
void KillAWorkerMidEpoch(const std::string& name, const nlohmann::json& consistency,
                         int max_timeouts) {
  const std::string dir = FreshTestDir(name);
  const std::string job = WriteTinyJob(name + "_job", {{"consistency", consistency}});
  // Mid-epoch: a worker that died at an epoch's end would be skipped as done with it.
  Script script;
  script.steps = {{"chief", true, "written (epoch 1 and",
                   [](ProcessGroup& group) {
                     Send(SIGKILL, {"worker1"})(group);
                     Send(SIGSTOP, {"worker0"})(group);
                   }},
                  {"worker1", true, "job received", Send(SIGCONT, {"worker0"})}};
  ProcessRun run = RunTinyJob(
      4, dir, {"--job=" + job, absl::StrCat("--checkpoint_every_steps=", kCheckpointEverySteps)},
      &script);
  ExpectCleanExits(run, "worker1");
  EXPECT_EQ(ParseEpochLosses(run.stdout_of["chief"]).size(), 4u) << run.stdout_of["chief"];
  ExpectEveryEpochWhole(run, dir, 4, 4);
  for (int i = 0; i < 2; ++i) {
    const std::string& ps_log = run.stderr_of[absl::StrCat("ps", i)];
    const std::map<int, PsStatusResponse> final_status = FinalPsStatuses(ps_log);
    ASSERT_EQ(final_status.count(i), 1u) << ps_log;
    EXPECT_LE(final_status.at(i).consistency_timeouts(), max_timeouts)
        << "ps " << i << " waited for the dead worker at every step: "
        << final_status.at(i).DebugString() << ps_log << run.stderr_of["chief"];
  }
}

// Bounded staleness: the one wait for the dead worker, and at most one more on a loaded
// machine (waiting at every step would be tens).
TEST(FaultToleranceTest, AKilledWorkerDoesNotStallBoundedStaleness) {
  KillAWorkerMidEpoch("worker_kill_staleness",
                      {{"mode", "bounded_staleness"}, {"staleness", 2}, {"timeout_ms", 2000}},
                      2);
}

// Sync: this job, fault-free, already times out twice an epoch (each ps, with chunks of 2
// steps: seen in the log of every run, before the kill too); the dead worker adds one.
// Waiting for it at every step until it is back would add one a push.
TEST(FaultToleranceTest, AKilledWorkerDoesNotStallSyncTraining) {
  KillAWorkerMidEpoch("worker_kill_sync", {{"mode", "sync"}, {"timeout_ms", 2000}}, 2 * 4 + 2);
}

// Kills ps1 when `kill_ps1` fires: the workers (or the chief's own checkpoint read)
// report it, the chief pauses training, waits for the launcher to bring it back empty,
// restores its shards from the newest checkpoint (one is also written in the middle of
// every epoch) and resumes; the job completes, every epoch whole.
void KillPs1(const std::string& name, const Step& kill_ps1) {
  const std::string dir = FreshTestDir(name);
  Script script{{kill_ps1}};
  ProcessRun run = RunTinyJob(
      4, dir, {absl::StrCat("--checkpoint_every_steps=", kCheckpointEverySteps)}, &script);
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
  ExpectEveryEpochWhole(run, dir, 4, 4);
}

TEST(FaultToleranceTest, APsKilledMidEpochIsRestoredFromTheLatestCheckpoint) {
  // Right after the first mid-epoch checkpoint of epoch 2.
  KillPs1("ps_kill", {"chief", true, "written (epoch 1 and", Send(SIGKILL, {"ps1"})});
}

// At an epoch's end: the chief's epoch-end checkpoint read, or the next epoch's first
// push (to a ps that has no variables at all yet), finds it.
TEST(FaultToleranceTest, APsKilledAtAnEpochsEndIsRestoredFromTheLatestCheckpoint) {
  KillPs1("ps_kill_epoch_end", {"chief", false, "Epoch 2/", Send(SIGKILL, {"ps1"})});
}

// The chief SIGKILLed mid-epoch and restarted with the same TF_CONFIG: the ps and workers
// register again, it resumes from the newest checkpoint at its data positions, and the
// step count goes on from that checkpoint's.
TEST(FaultToleranceTest, AKilledChiefIsRestartedAndResumesFromTheLatestCheckpoint) {
  const std::string dir = FreshTestDir("chief_kill");
  Script script{{{"chief", true, "written (epoch 1 and", Send(SIGKILL, {"chief"})}}};
  // Every checkpoint kept, so the one restored can be read back at the end.
  ProcessRun run = RunTinyJob(
      4, dir,
      {absl::StrCat("--checkpoint_every_steps=", kCheckpointEverySteps), "--keep_checkpoints=100"},
      &script);
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
  // The restored checkpoint was a mid-epoch one of epoch 2, and the
  // new chief went on from its step and data positions: the job's last step is exactly 4
  // epochs' (no step of epoch 2 run twice or skipped).
  absl::StatusOr<std::unique_ptr<CheckpointReader>> first = CheckpointReader::Open(restored);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->epoch(), 1);
  EXPECT_GT((*first)->step(), kStepsPerEpoch);
  EXPECT_LT((*first)->step(), 2 * kStepsPerEpoch);
  ExpectEveryEpochWhole(run, dir, 4, CountOf(log, ": 400 samples in "));
  EXPECT_GE(CountOf(log, ": 400 samples in "), 3) << log;  // epochs 1, 3 and 4 at least
}

// The chief SIGKILLed while it writes a checkpoint (files written, not yet committed: a
// 2 s pause before the commit, against the milliseconds the kill takes to land): the
// previous checkpoint is intact, the restarted chief loads it, and the job completes.
TEST(FaultToleranceTest, AChiefKilledWhileWritingACheckpointLeavesThePreviousOneToRestore) {
  const std::string dir = FreshTestDir("chief_kill_in_write");
  // The second checkpoint (the end of epoch 2) is the one interrupted.
  Script script{{{"chief", true, "writing checkpoint", [](ProcessGroup&) {}},
                 {"chief", true, "writing checkpoint", Send(SIGKILL, {"chief"})}}};
  ProcessRun run = RunTinyJob(3, dir, {"--testing_checkpoint_commit_delay=2s"}, &script);
  ExpectCleanExits(run, "chief");
  const std::string& log = run.stderr_of["chief"];
  size_t restored_at = 0;
  const std::string restored = WordAfter(log, "restored ", &restored_at);
  const std::vector<std::string> before = CheckpointsWritten(log, restored_at);
  ASSERT_EQ(before.size(), 1u) << log;  // only epoch 1's was committed
  EXPECT_EQ(restored, before[0]) << log;
  EXPECT_NE(log.find("(epoch 1, step", restored_at), std::string::npos) << log;
  const std::string& out = run.stdout_of["chief"];
  EXPECT_EQ(CountOf(out, "Epoch 3/3"), 1) << out;
  ExpectEveryEpochWhole(run, dir, 3, CountOf(log, ": 400 samples in "));
  // The interrupted write left no half checkpoint behind once a later one succeeded.
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_FALSE(absl::StartsWith(entry.path().filename().string(), ".tmp-")) << entry.path();
  }
}

// The manifest version of the newest checkpoint in `dir`, and no temporary folder left.
int NewestVersionAndNoTemp(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_FALSE(absl::StartsWith(entry.path().filename().string(), ".tmp-")) << entry.path();
  }
  absl::StatusOr<std::unique_ptr<CheckpointReader>> last = CheckpointReader::Open(dir);
  EXPECT_TRUE(last.ok()) << last.status();
  return last.ok() ? (*last)->version() : 0;
}

// Sharded checkpoints (the ps share the chief's folder): a ps killed while it writes its
// shard of the epoch-2 checkpoint (a 2 s pause before it syncs and answers) fails that
// write; the chief recovers it from the epoch-1 checkpoint, each ps reading its rows, and
// the job completes with sharded checkpoints and no partial folder.
TEST(FaultToleranceTest, APsKilledWhileWritingItsShardLeavesThePreviousCheckpoint) {
  const std::string dir = FreshTestDir("ps_kill_in_shard");
  Script script{{{"chief", true, "writing checkpoint", [](ProcessGroup&) {}},
                 {"chief", true, "writing checkpoint", Send(SIGKILL, {"ps1"})}}};
  ProcessRun run = RunTinyJob(
      3, dir, {}, &script,
      {absl::StrCat("--checkpoint_dir=", dir), "--testing_checkpoint_shard_delay=2s"});
  ExpectCleanExits(run, "ps1");
  const std::string& log = run.stderr_of["chief"];
  size_t restored_at = 0;
  const std::string restored =
      WordAfter(log, "came back empty; its shards restored from ", &restored_at);
  const std::vector<std::string> before = CheckpointsWritten(log, restored_at);
  ASSERT_EQ(before.size(), 1u) << log;  // only epoch 1's was committed
  EXPECT_EQ(restored, before[0]) << log;
  EXPECT_EQ(NewestVersionAndNoTemp(dir), 2) << log;
}

// The chief killed in the middle of committing a sharded checkpoint (after every ps wrote
// its shard, during a 2 s pause before the rename): the restarted chief removes the
// folder, restores the previous checkpoint onto the ps (each reading its rows) and the
// job completes.
TEST(FaultToleranceTest, AChiefKilledWhileCommittingAShardedCheckpointLeavesThePreviousOne) {
  const std::string dir = FreshTestDir("chief_kill_in_sharded_commit");
  Script script{{{"chief", true, "writing checkpoint", [](ProcessGroup&) {}},
                 {"chief", true, "writing checkpoint", Send(SIGKILL, {"chief"})}}};
  ProcessRun run = RunTinyJob(3, dir, {"--testing_checkpoint_commit_delay=2s"}, &script,
                              {absl::StrCat("--checkpoint_dir=", dir)});
  ExpectCleanExits(run, "chief");
  const std::string& log = run.stderr_of["chief"];
  size_t restored_at = 0;
  const std::string restored = WordAfter(log, "restored ", &restored_at);
  const std::vector<std::string> before = CheckpointsWritten(log, restored_at);
  ASSERT_EQ(before.size(), 1u) << log;
  EXPECT_EQ(restored, before[0]) << log;
  ExpectEveryEpochWhole(run, dir, 3, CountOf(log, ": 400 samples in "));
  EXPECT_EQ(NewestVersionAndNoTemp(dir), 2) << log;
}

// A job checkpointed by 3 ps (sharded) resumes on 2 ps, then on 4: each run restores the
// previous one's checkpoint shard by shard and trains one more epoch, every epoch whole.
TEST(FaultToleranceTest, ShardedCheckpointsOfThreePsResumeOnTwoAndOnFour) {
  const std::string dir = FreshTestDir("sharded_repartition");
  const std::vector<std::string> ps_args = {absl::StrCat("--checkpoint_dir=", dir)};
  int epochs = 0;
  for (int num_ps : {3, 2, 4}) {
    SCOPED_TRACE(absl::StrCat(num_ps, " ps"));
    ++epochs;
    ProcessRun run = RunTinyJob(epochs, dir, {}, nullptr, ps_args, num_ps);
    ExpectCleanExits(run, "", 3 + num_ps);
    const std::string& log = run.stderr_of["chief"];
    if (epochs > 1) {
      EXPECT_NE(log.find(absl::StrCat("onto ", num_ps, " ps")), std::string::npos) << log;
      EXPECT_EQ(log.find("the chief reads it whole"), std::string::npos) << log;
    }
    EXPECT_EQ(log.find("(format 1)"), std::string::npos) << log;
    ExpectEveryEpochWhole(run, dir, epochs, 1);
    EXPECT_EQ(NewestVersionAndNoTemp(dir), 2) << log;
  }
}

// A bit flipped in the newest checkpoint's tensor data: the next run reports it in one
// line, restores the previous checkpoint instead, and trains on to the end.
TEST(FaultToleranceTest, ACorruptedTensorFileFallsBackToThePreviousCheckpoint) {
  const std::string dir = FreshTestDir("corrupt");
  ProcessRun first = RunTinyJob(2, dir, {}, nullptr);
  ExpectCleanExits(first, "");
  const std::vector<std::string> written =
      CheckpointsWritten(first.stderr_of["chief"], std::string::npos);
  ASSERT_EQ(written.size(), 2u) << first.stderr_of["chief"];
  {
    const std::string data = written[1] + "/data-00000";
    ASSERT_TRUE(FlipByte(data, 1000, 0x10)) << data;
  }
  ProcessRun second = RunTinyJob(4, dir, {}, nullptr);
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
  // Epochs 2 to 4 trained again from epoch 1's checkpoint, to the whole job's last step.
  ExpectEveryEpochWhole(second, dir, 4, 3);
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
  // 20 ms steps: 27 epochs of 7 rounds, seconds, are left when psctl asks at "Epoch 3/".
  options.worker_args = {"--testing_step_delay=20ms"};
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
