// Recovery from lost tasks, checked by reading values and exits back rather than by
// accuracy alone: the three real binaries as processes (1 chief, 2 ps, 2 workers) on the
// tiny job. A ps restored from a checkpoint holds exactly the checkpoint's tensors while
// the surviving ps keeps its own; a ps that never returns, or losing every worker, fails
// the job naming the task; a hung (SIGSTOPped) worker is lost and its chunk run again.

#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/daemon/rpc/grpc_chief_client.h"
#include "common/checkpoint/checkpoint.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_server/rpc/grpc_ps_client.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

const std::vector<std::string> kTaskFlags = {"--heartbeat_interval=200ms", "--chief_timeout=20s"};

// The text between `before` and the next space (or the end of the line) in `line`.
std::string WordAfter(const std::string& line, const std::string& before) {
  const size_t at = line.find(before);
  if (at == std::string::npos) return "";
  const size_t begin = at + before.size();
  return line.substr(begin, line.find_first_of(" \n", begin) - begin);
}

// Every variable's state on the ps at `address`, by name.
std::map<std::string, VariableSnapshot> ReadAll(const std::string& address) {
  std::unique_ptr<PsClient> ps = CreateGrpcPsClient(0, address, absl::Seconds(10));
  absl::StatusOr<std::vector<VariableSnapshot>> state = ps->ReadState({});
  EXPECT_TRUE(state.ok()) << state.status();
  std::map<std::string, VariableSnapshot> by_name;
  if (state.ok()) {
    for (VariableSnapshot& s : *state) by_name[s.name] = std::move(s);
  }
  return by_name;
}

// Value, slots, version and iterations all bit-identical.
void ExpectSameState(const VariableSnapshot& a, const VariableSnapshot& b) {
  EXPECT_EQ(a.value.shape(), b.value.shape()) << a.name;
  EXPECT_TRUE(a.value.values() == b.value.values()) << a.name << " differs";
  EXPECT_EQ(a.version, b.version) << a.name;
  EXPECT_EQ(a.iterations, b.iterations) << a.name;
  ASSERT_EQ(a.slots.size(), b.slots.size()) << a.name;
  for (size_t k = 0; k < a.slots.size(); ++k) {
    EXPECT_EQ(a.slots[k].name, b.slots[k].name) << a.name;
    EXPECT_TRUE(a.slots[k].tensor.values() == b.slots[k].tensor.values())
        << a.name << " slot " << a.slots[k].name << " differs";
  }
}

// ps1 is killed during epoch 3, after ps0 has taken pushes past the epoch-2 checkpoint.
// The chief pauses training; the test stops both workers and reads ps0, and only then
// restarts ps1 (as an orchestrator would, but at the moment the test chooses: the
// restart waits for it), so nothing moves while it reads every ps after the recovery:
// the restored ps1 holds exactly the checkpoint's values, slots, iterations and versions,
// and ps0's state is bit-identical before and after the recovery, still ahead of the
// checkpoint (nothing rolled it back). The workers then go on and the job completes.
TEST(RecoveryClusterTest, ARestoredPsHoldsTheCheckpointAndTheSurvivorKeepsItsOwnState) {
  const std::string dir = FreshTestDir("ps_restore");
  ProcessGroup group;
  // Restarted when the test says so (RestartNow), not after a delay it must race.
  group.SetRestartPolicy(RestartLikeAnOrchestrator, absl::InfiniteDuration());
  // Slow steps (0.1 s each) over 800 samples: an epoch is 13 rounds of both workers,
  // over 1.3 s, against the 0.1 s polls that decide when ps1 dies within epoch 3.
  const std::string job =
      WriteTinyJob("ps_restore_job", {{"data", {{"train", {{"samples", 800}}}}}});
  const TestCluster cluster = StartTestCluster(
      group, 2, 2, kTaskFlags,
      {"--job=" + job, "--epochs=5", "--steps_per_call=2", "--checkpoint_dir=" + dir,
       "--keep_checkpoints=10", "--ps_recovery_timeout=60s"},
      {{0, {"--testing_step_delay=100ms"}}, {1, {"--testing_step_delay=100ms"}}});
  ASSERT_EQ(cluster.ps.size(), 2u);
  std::unique_ptr<PsClient> ps0 = CreateGrpcPsClient(0, cluster.ps[0], absl::Seconds(5));
  std::unique_ptr<ChiefClient> chief = CreateGrpcChiefClient(cluster.chief, absl::Seconds(5));

  enum class Stage {
    kWaitForCheckpoint,
    kLetPs0MoveOn,
    kWaitForPause,
    kRestartPs1,
    kWaitForRestore,
    kDone
  };
  Stage stage = Stage::kWaitForCheckpoint;
  std::string checkpoint;     // the epoch-2 checkpoint's path
  std::string restored_from;  // the path the chief says it restored ps1 from
  int64_t pushes_at_checkpoint = 0;
  std::map<std::string, VariableSnapshot> ps0_paused, ps0_after, ps1_after;
  ProcessRun run;
  auto act = [&]() {
    switch (stage) {
      case Stage::kWaitForCheckpoint:
        if (checkpoint.empty()) return;
        if (absl::StatusOr<PsStatusResponse> s = ps0->GetStatus(); s.ok()) {
          pushes_at_checkpoint = s->pushes();
          stage = Stage::kLetPs0MoveOn;
        }
        return;
      case Stage::kLetPs0MoveOn:
        // Both workers pushed to ps0 twice since: ps0 is ahead of the checkpoint.
        if (absl::StatusOr<PsStatusResponse> s = ps0->GetStatus();
            s.ok() && s->pushes() >= pushes_at_checkpoint + 4) {
          EXPECT_TRUE(group.Signal("ps1", SIGKILL).ok());
          stage = Stage::kWaitForPause;
        }
        return;
      case Stage::kWaitForPause:
        // "recovering": every chunk came back, no push is in flight.
        if (absl::StatusOr<ChiefStatusResponse> s = chief->GetStatus();
            s.ok() && s->phase() == ChiefStatusResponse::RECOVERING) {
          EXPECT_TRUE(group.Signal("worker0", SIGSTOP).ok());
          EXPECT_TRUE(group.Signal("worker1", SIGSTOP).ok());
          ps0_paused = ReadAll(cluster.ps[0]);
          stage = Stage::kRestartPs1;
        }
        return;
      case Stage::kRestartPs1:
        // Waits for this group to have seen ps1's death (it has: the chief did).
        if (group.RestartNow("ps1").ok()) stage = Stage::kWaitForRestore;
        return;
      case Stage::kWaitForRestore:
        if (restored_from.empty()) return;
        ps0_after = ReadAll(cluster.ps[0]);
        ps1_after = ReadAll(cluster.ps[1]);
        EXPECT_TRUE(group.Signal("worker0", SIGCONT).ok());
        EXPECT_TRUE(group.Signal("worker1", SIGCONT).ok());
        stage = Stage::kDone;
        return;
      case Stage::kDone:
        return;
    }
  };
  run.exits = group.Wait(
      absl::Minutes(4), absl::Seconds(15),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        if (name != "chief" || !is_stderr) return;
        if (checkpoint.empty() && absl::StrContains(line, " written (epoch 2,")) {
          checkpoint = WordAfter(line, "checkpoint ");
        }
        if (absl::StrContains(line, "came back empty; its shards restored from ")) {
          restored_from = WordAfter(line, "came back empty; its shards restored from ");
        }
      },
      // Polled every 0.1 s on this thread, the one that drives the group.
      [&]() {
        act();
        return false;
      });
  const std::string& log = run.stderr_of["chief"];
  ASSERT_EQ(stage, Stage::kDone) << log;
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
    EXPECT_EQ(exit.restarts, exit.name == "ps1" ? 1 : 0) << exit.name;
  }
  EXPECT_EQ(ParseEpochLosses(run.stdout_of["chief"]).size(), 5u) << run.stdout_of["chief"];
  EXPECT_EQ(restored_from, checkpoint) << log;
  EXPECT_TRUE(absl::StrContains(log, " written (epoch 2,")) << log;
  EXPECT_FALSE(absl::StrContains(log.substr(0, log.find("came back empty")), " written (epoch 3,"))
      << "ps1 was killed after epoch 3's checkpoint\n" << log;

  absl::StatusOr<std::unique_ptr<CheckpointReader>> saved = CheckpointReader::Open(checkpoint);
  ASSERT_TRUE(saved.ok()) << saved.status();
  const nlohmann::json& info = (*saved)->metadata()["variables"];
  // ps1 holds exactly what the checkpoint holds for its variables.
  ASSERT_FALSE(ps1_after.empty());
  for (const auto& [name, state] : ps1_after) {
    SCOPED_TRACE(name);
    absl::StatusOr<const Tensor*> value = (*saved)->Get(name);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_TRUE(state.value.values() == (*value)->values());
    EXPECT_EQ(state.iterations, info[name]["iterations"].get<int64_t>());
    EXPECT_EQ(state.version, info[name]["version"].get<int64_t>());
    ASSERT_FALSE(state.slots.empty());
    for (const NamedTensor& slot : state.slots) {
      absl::StatusOr<const Tensor*> saved_slot = (*saved)->Get(name + "/optimizer/" + slot.name);
      ASSERT_TRUE(saved_slot.ok()) << saved_slot.status();
      EXPECT_TRUE(slot.tensor.values() == (*saved_slot)->values()) << slot.name;
    }
  }
  // ps0 is untouched by the recovery, and ahead of the checkpoint (not rolled back).
  ASSERT_FALSE(ps0_paused.empty());
  ASSERT_EQ(ps0_paused.size(), ps0_after.size());
  for (const auto& [name, state] : ps0_paused) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(ps0_after.count(name));
    ExpectSameState(state, ps0_after.at(name));
    EXPECT_GT(state.version, info[name]["version"].get<int64_t>());
    absl::StatusOr<const Tensor*> value = (*saved)->Get(name);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_FALSE(state.value.values() == (*value)->values());
  }
}

// The first time (in the log line `marker` of `log`), as the process recorded it.
absl::Time TimeOfLine(const std::string& log, const std::string& marker) {
  const std::string line = FirstLineWith(log, marker);
  EXPECT_FALSE(line.empty()) << marker << " not in\n" << log;
  absl::StatusOr<absl::Time> at = LogLineTime(line, absl::Now());
  EXPECT_TRUE(at.ok()) << at.status();
  return at.ok() ? *at : absl::InfinitePast();
}

// Every process but the chief exited by itself (the chief told them to stop).
void ExpectTheOthersExitedByThemselves(ProcessRun& run, const std::vector<std::string>& killed) {
  for (const auto& exit : run.exits) {
    if (exit.name == "chief" ||
        std::find(killed.begin(), killed.end(), exit.name) != killed.end()) {
      continue;
    }
    EXPECT_EQ(exit.signal, 0) << exit.name << " had to be killed\n" << run.stderr_of[exit.name];
  }
}

// ps1 killed and never restarted: training pauses, the chief waits --ps_recovery_timeout
// (4 s here, measured in its own log from the pause to the failure) and fails the job,
// naming the ps and its address.
TEST(RecoveryClusterTest, APsThatNeverReturnsFailsTheJobWithinTheRecoveryTimeout) {
  ProcessGroup group;
  const TestCluster cluster = StartTestCluster(
      group, 2, 2, kTaskFlags,
      {"--job=tests/testdata/tiny_synthetic.json", "--epochs=100", "--steps_per_call=2",
       "--ps_recovery_timeout=4s"});
  const SignalOnLine kill_ps1{"chief", "Epoch 2/", "ps1", SIGKILL};
  ProcessRun run = CollectRun(group, absl::Minutes(3), absl::Minutes(2), &kill_ps1);
  ASSERT_TRUE(run.signalled);
  const std::string& log = run.stderr_of["chief"];
  for (const auto& exit : run.exits) {
    if (exit.name == "chief") {
      EXPECT_EQ(exit.exit_code, 1) << log;
    }
  }
  ExpectTheOthersExitedByThemselves(run, {"ps1"});
  const std::string failure = FirstLineWith(log, "job failed: ");
  EXPECT_TRUE(absl::StartsWith(failure, "E ")) << log;
  EXPECT_TRUE(absl::StrContains(failure, "did not come back within 4s")) << failure;
  EXPECT_TRUE(absl::StrContains(failure, "ps task 1 (" + cluster.ps[1] + ")")) << failure;
  EXPECT_FALSE(absl::StrContains(failure, "ps task 0")) << failure;
  const absl::Duration waited =
      TimeOfLine(log, "job failed: ") - TimeOfLine(log, "; training pauses");
  EXPECT_GE(waited, absl::Seconds(4)) << log;
  EXPECT_LT(waited, absl::Seconds(4 + 30)) << log;  // gave up, did not hang
}

// Both workers killed (no restarts): the chief fails the job naming both, and the ps tasks
// are told to stop.
TEST(RecoveryClusterTest, LosingEveryWorkerFailsTheJobNamingThem) {
  ProcessGroup group;
  const TestCluster cluster = StartTestCluster(
      group, 2, 2, kTaskFlags,
      {"--job=tests/testdata/tiny_synthetic.json", "--epochs=100", "--steps_per_call=2",
       "--rpc_timeout=5s"});
  bool killed = false;
  ProcessRun run;
  run.exits = group.Wait(
      absl::Minutes(3), absl::Minutes(2),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        if (!killed && name == "chief" && !is_stderr && absl::StartsWith(line, "Epoch 2/")) {
          killed = true;
          EXPECT_TRUE(group.Signal("worker0", SIGKILL).ok());
          EXPECT_TRUE(group.Signal("worker1", SIGKILL).ok());
        }
      },
      nullptr);
  ASSERT_TRUE(killed);
  const std::string& log = run.stderr_of["chief"];
  for (const auto& exit : run.exits) {
    if (exit.name == "chief") {
      EXPECT_EQ(exit.exit_code, 1) << log;
    }
  }
  ExpectTheOthersExitedByThemselves(run, {"worker0", "worker1"});
  const std::string failure = FirstLineWith(log, "job failed: ");
  EXPECT_TRUE(absl::StrContains(failure, "every worker is lost")) << log;
  EXPECT_TRUE(absl::StrContains(failure, "worker task 0 (" + cluster.workers[0] + ")")) << failure;
  EXPECT_TRUE(absl::StrContains(failure, "worker task 1 (" + cluster.workers[1] + ")")) << failure;
}

// worker1 SIGSTOPped at the end of epoch 2: alive and connected, it answers nothing, so its
// next RunSteps misses the chunk deadline (--run_steps_timeout, 10 s: a healthy chunk of 2
// tiny steps takes milliseconds, even on a loaded machine). The chief treats it as lost
// and worker0 runs the chunk again from its first step: every epoch still trains all 400
// samples. Resumed, worker1 comes back and the job ends with every process exiting 0.
TEST(RecoveryClusterTest, AHungWorkerIsLostAndItsChunkRunsAgain) {
  ProcessGroup group;
  const TestCluster cluster = StartTestCluster(
      group, 2, 2, kTaskFlags,
      {"--job=tests/testdata/tiny_synthetic.json", "--epochs=5", "--steps_per_call=2",
       "--run_steps_timeout=" + absl::FormatDuration(ScaledForSanitizers(absl::Seconds(10)))});
  bool stopped = false, resumed = false;
  ProcessRun run;
  run.exits = group.Wait(
      absl::Minutes(3), absl::Seconds(15),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        if (name != "chief") return;
        if (!stopped && !is_stderr && absl::StartsWith(line, "Epoch 2/")) {
          stopped = true;
          EXPECT_TRUE(group.Signal("worker1", SIGSTOP).ok());
        }
        if (stopped && !resumed && is_stderr && absl::StrContains(line, " lost: ")) {
          resumed = true;
          EXPECT_TRUE(group.Signal("worker1", SIGCONT).ok());
        }
      },
      nullptr);
  ASSERT_TRUE(stopped);
  const std::string& log = run.stderr_of["chief"];
  ASSERT_TRUE(resumed) << log;
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  const std::string lost = FirstLineWith(log, " lost: ");
  EXPECT_TRUE(absl::StrContains(lost, "worker task 1 (" + cluster.workers[1] + ")")) << lost;
  EXPECT_TRUE(absl::StrContains(lost, "its shard goes to the others")) << lost;
  // It ran again once, on worker0 (worker1 takes work again from a later epoch), and each
  // of the job's 5 x 14 steps was answered once.
  const std::vector<std::string> again = LinesWith(log, " did not answer ran again on ");
  ASSERT_EQ(again.size(), 1u) << log;
  EXPECT_TRUE(absl::StrContains(again[0], "that worker task 1 (" + cluster.workers[1] + ")"))
      << again[0];
  EXPECT_TRUE(absl::StrContains(again[0], "ran again on worker task 0 (" + cluster.workers[0]))
      << again[0];
  const std::vector<int64_t> per_worker = StepsPerWorker(log);
  ASSERT_EQ(per_worker.size(), 2u) << log;
  EXPECT_EQ(per_worker[0] + per_worker[1], 5 * 14) << log;
  // The chunk whose answer never came was trained anyway: every epoch has every sample.
  EXPECT_EQ(ParseEpochLosses(run.stdout_of["chief"]).size(), 5u) << run.stdout_of["chief"];
  int full_epochs = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, ": 400 samples in ")) ++full_epochs;
  }
  EXPECT_EQ(full_epochs, 5) << log;
}

}  // namespace
}  // namespace pstrain
