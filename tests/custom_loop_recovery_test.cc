// examples/custom_loop under parameter_server as real processes (a chief, 2 ps, 2
// workers, configured by flags and TF_CONFIG on free ports) with --checkpoint_dir, on the
// tiny synthetic job: the chief killed and restarted resumes from its newest checkpoint,
// whose values (and optimizer slots, counts, versions) are then exactly what the ps hold;
// a chief preempted by SIGTERM writes a checkpoint at once, exits 42 leaving its tasks
// running, and its restart takes the job to the end from there; a ps killed mid-epoch
// and restarted gets its shards back from the newest checkpoint and training goes on.

#include <signal.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/checkpoint/checkpoint.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_server/rpc/grpc_ps_client.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

constexpr char kCustomLoop[] = "examples/custom_loop";
const std::map<std::string, std::string> kOneBlasThread = {{"OPENBLAS_NUM_THREADS", "1"}};

// The tiny job with 200 steps an epoch: two rounds of the loop's 100 between checkpoints.
std::string Job(const std::string& name) {
  return WriteTinyJob(name, {{"data", {{"train", {{"samples", 6400}}}}}});
}

// The text between `before` and the next space (or the end of the line) in `text`.
std::string WordAfter(const std::string& text, const std::string& before) {
  const size_t at = text.find(before);
  if (at == std::string::npos) return "";
  const size_t begin = at + before.size();
  return text.substr(begin, text.find_first_of(" \n)", begin) - begin);
}

// Where each task listens, as MakeTfConfig takes it.
using Cluster = std::vector<std::pair<std::string, std::vector<std::string>>>;

// Starts custom_loop as every task of a chief, 2 ps and 2 workers on free ports, named
// "chief", "ps0", ..., "worker1", each with `args` and its TF_CONFIG.
Cluster StartCluster(ProcessGroup& group, const std::vector<std::string>& args) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(5);
  EXPECT_TRUE(ports.ok()) << ports.status();
  if (!ports.ok()) return {};
  auto at = [&](int i) { return absl::StrCat("localhost:", (*ports)[i]); };
  const Cluster cluster = {{"chief", {at(0)}}, {"ps", {at(1), at(2)}}, {"worker", {at(3), at(4)}}};
  for (const auto& [job, addresses] : cluster) {
    for (size_t i = 0; i < addresses.size(); ++i) {
      std::map<std::string, std::string> env = kOneBlasThread;
      env["TF_CONFIG"] = MakeTfConfig(cluster, job, static_cast<int>(i));
      const std::string name = job == "chief" ? job : absl::StrCat(job, i);
      EXPECT_TRUE(group.Start({name, kCustomLoop, args, env}).ok()) << name;
    }
  }
  return cluster;
}

// Every variable's state on the ps tasks, by name (each whole on one ps: the tiny
// model's variables are below the size that splits one).
std::map<std::string, VariableSnapshot> ReadAll(const Cluster& cluster) {
  std::map<std::string, VariableSnapshot> by_name;
  const std::vector<std::string>& ps = cluster[1].second;
  for (size_t p = 0; p < ps.size(); ++p) {
    std::unique_ptr<PsClient> client =
        CreateGrpcPsClient(static_cast<int>(p), ps[p], absl::Seconds(10));
    absl::StatusOr<std::vector<VariableSnapshot>> state = client->ReadState({});
    EXPECT_TRUE(state.ok()) << state.status();
    if (!state.ok()) continue;
    for (VariableSnapshot& s : *state) by_name[s.name] = std::move(s);
  }
  return by_name;
}

// Pushes the ps tasks have taken so far, in all (-1 when one does not answer).
int64_t PushesSoFar(const Cluster& cluster) {
  int64_t pushes = 0;
  for (size_t p = 0; p < cluster[1].second.size(); ++p) {
    std::unique_ptr<PsClient> client =
        CreateGrpcPsClient(static_cast<int>(p), cluster[1].second[p], absl::Seconds(5));
    absl::StatusOr<PsStatusResponse> status = client->GetStatus();
    if (!status.ok()) return -1;
    pushes += status->pushes();
  }
  return pushes;
}

// The chief is SIGKILLed once its epoch-2 checkpoint is written. The test stops both
// workers and waits until no push lands any more, then restarts the chief (as an
// orchestrator would, at the moment the test chooses), so nothing moves while it reads
// every ps after the restore: the ps hold exactly the restored checkpoint's values,
// slots, iterations and versions. The workers then go on and the restarted chief trains
// the epochs left, starting after the checkpoint's.
TEST(CustomLoopRecoveryTest, AKilledChiefRestartedResumesFromItsCheckpoint) {
  const std::string dir = FreshTestDir("killed_chief");
  ProcessGroup group;
  group.SetRestartPolicy(RestartLikeAnOrchestrator, absl::InfiniteDuration());
  const Cluster cluster =
      StartCluster(group, {"--job=" + Job("killed_chief_job"), "--epochs=5",
                           "--strategy=parameter_server", "--checkpoint_dir=" + dir});
  ASSERT_EQ(cluster.size(), 3u);

  enum class Stage { kWaitForCheckpoint, kWaitForQuiet, kRestartChief, kWaitForRestore, kDone };
  Stage stage = Stage::kWaitForCheckpoint;
  bool checkpoint_written = false;
  int64_t last_pushes = -2;
  int quiet_polls = 0;
  std::string restored_from;  // the path the restarted chief restored
  std::map<std::string, VariableSnapshot> restored_state;
  // Read while the workers are stopped: later checkpoints replace the older ones (3 kept).
  absl::StatusOr<std::unique_ptr<CheckpointReader>> saved =
      absl::NotFoundError("no checkpoint restored");
  ProcessRun run;
  auto act = [&]() {
    switch (stage) {
      case Stage::kWaitForCheckpoint:
        if (!checkpoint_written) return;
        EXPECT_TRUE(group.Signal("chief", SIGKILL).ok());
        EXPECT_TRUE(group.Signal("worker0", SIGSTOP).ok());
        EXPECT_TRUE(group.Signal("worker1", SIGSTOP).ok());
        stage = Stage::kWaitForQuiet;
        return;
      case Stage::kWaitForQuiet: {
        // Pushes already sent when the workers stopped still land: three polls (0.3 s)
        // without a new one.
        const int64_t pushes = PushesSoFar(cluster);
        quiet_polls = pushes >= 0 && pushes == last_pushes ? quiet_polls + 1 : 0;
        last_pushes = pushes;
        if (quiet_polls >= 3) stage = Stage::kRestartChief;
        return;
      }
      case Stage::kRestartChief:
        if (group.RestartNow("chief").ok()) stage = Stage::kWaitForRestore;
        return;
      case Stage::kWaitForRestore:
        if (restored_from.empty()) return;
        restored_state = ReadAll(cluster);
        saved = CheckpointReader::Open(restored_from);
        EXPECT_TRUE(group.Signal("worker0", SIGCONT).ok());
        EXPECT_TRUE(group.Signal("worker1", SIGCONT).ok());
        stage = Stage::kDone;
        return;
      case Stage::kDone:
        return;
    }
  };
  run.exits = group.Wait(
      absl::Minutes(4), absl::Seconds(30),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        if (name != "chief" || !is_stderr) return;
        if (absl::StrContains(line, " written (epoch 2,")) checkpoint_written = true;
        if (absl::StrContains(line, "restored the variables from checkpoint ")) {
          restored_from = WordAfter(line, "restored the variables from checkpoint ");
        }
      },
      [&]() {
        act();
        return false;
      });
  const std::string& log = run.stderr_of["chief"];
  const std::string& out = run.stdout_of["chief"];
  ASSERT_EQ(stage, Stage::kDone) << log;
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
    EXPECT_EQ(exit.restarts, exit.name == "chief" ? 1 : 0) << exit.name;
  }

  ASSERT_TRUE(saved.ok()) << saved.status();
  // The newest checkpoint when the chief died: epoch 2's, or epoch 3's if it came first.
  const int resumed_epoch = (*saved)->epoch();
  EXPECT_GE(resumed_epoch, 2) << log;
  EXPECT_EQ((*saved)->step(), int64_t{resumed_epoch} * 200) << log;
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("resumed from the checkpoint of epoch ",
                                                  resumed_epoch, ", step ", resumed_epoch * 200)))
      << out;
  // After the restart, one line for each epoch after the checkpoint's.
  const size_t resumed = out.find("resumed from the checkpoint");
  ASSERT_NE(resumed, std::string::npos) << out;
  EXPECT_EQ(ParseEpochLosses(out.substr(resumed)).size(), static_cast<size_t>(5 - resumed_epoch))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "Epoch 5/5")) << out;
  // The restarted chief ran only the steps after the checkpoint.
  const size_t at = out.rfind("functions run per worker:");
  ASSERT_NE(at, std::string::npos) << out;
  int64_t run_after = 0;
  for (absl::string_view n : absl::StrSplit(out.substr(at + 25, out.find('\n', at) - at - 25),
                                            ' ', absl::SkipEmpty())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(n, &v)) run_after += v;
  }
  EXPECT_EQ(run_after, (5 - resumed_epoch) * 200) << out;

  // The ps hold exactly what the restored checkpoint holds.
  const nlohmann::json& info = (*saved)->metadata()["variables"];
  ASSERT_EQ(restored_state.size(), 4u);  // two kernels, two biases
  for (const auto& [name, state] : restored_state) {
    SCOPED_TRACE(name);
    absl::StatusOr<const Tensor*> value = (*saved)->Get(name);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_TRUE(state.value.values() == (*value)->values());
    EXPECT_EQ(state.iterations, info[name]["iterations"].get<int64_t>());
    EXPECT_EQ(state.version, info[name]["version"].get<int64_t>());
    ASSERT_EQ(state.slots.size(), 2u);  // Adam's
    for (const NamedTensor& slot : state.slots) {
      absl::StatusOr<const Tensor*> saved_slot = (*saved)->Get(name + "/optimizer/" + slot.name);
      ASSERT_TRUE(saved_slot.ok()) << saved_slot.status();
      EXPECT_TRUE(slot.tensor.values() == (*saved_slot)->values()) << slot.name;
    }
  }
}

// SIGTERM reaches the chief during epoch 2: it stops scheduling, writes a checkpoint of
// the step it stopped at (mid-epoch) once the functions in flight are back, and exits 42
// without telling its tasks to leave; restarted at once (as Compose and Kubernetes
// restart a task that exits 42), it resumes from that step and finishes the job.
TEST(CustomLoopRecoveryTest, APreemptedChiefCheckpointsExits42AndItsRestartFinishesTheJob) {
  const std::string dir = FreshTestDir("preempted_chief");
  ProcessGroup group;
  group.SetRestartPolicy(RestartLikeAnOrchestrator);
  const Cluster cluster =
      StartCluster(group, {"--job=" + Job("preempted_chief_job"), "--epochs=4",
                           "--strategy=parameter_server", "--checkpoint_dir=" + dir});
  ASSERT_EQ(cluster.size(), 3u);
  bool signalled = false;
  // Read as soon as the chief names it: later checkpoints replace the older ones.
  absl::StatusOr<std::unique_ptr<CheckpointReader>> saved =
      absl::NotFoundError("the chief named no checkpoint");
  ProcessRun run;
  run.exits = group.Wait(
      absl::Minutes(4), absl::Seconds(30),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        if (name == "chief" && !is_stderr && !signalled && absl::StartsWith(line, "Epoch 1/")) {
          EXPECT_TRUE(group.Signal("chief", SIGTERM).ok());
          signalled = true;
        }
        if (name == "chief" && is_stderr && absl::StrContains(line, "preempted at step ")) {
          saved = CheckpointReader::Open(WordAfter(line, "the newest checkpoint is "));
        }
      },
      [] { return false; });
  const std::string& log = run.stderr_of["chief"];
  const std::string& out = run.stdout_of["chief"];
  ASSERT_TRUE(signalled) << log;
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
    // The chief exited 42 once (the restart policy started it again: only 42 or a
    // signal does), the others never.
    EXPECT_EQ(exit.restarts, exit.name == "chief" ? 1 : 0) << exit.name << "\n" << log;
  }
  // "custom_loop: SIGTERM: preempted at step N; the newest checkpoint is PATH".
  const std::string step_text = WordAfter(log, "SIGTERM: preempted at step ");
  int64_t step = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripSuffix(step_text, ";"), &step)) << log;
  ASSERT_TRUE(saved.ok()) << saved.status() << "\n" << log;
  EXPECT_EQ((*saved)->step(), step);
  // Mid-epoch 2 (a round of 100 steps after epoch 1's 200), or epoch 2's end at the latest.
  EXPECT_GT(step, 200) << log;
  EXPECT_LE(step, 400) << log;
  // The tasks stayed for the restarted chief, which resumed from that step.
  EXPECT_TRUE(absl::StrContains(log, "leaving the ps and worker tasks running")) << log;
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("resumed from the checkpoint of epoch ",
                                                  (*saved)->epoch(), ", step ", step)))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "Epoch 4/4")) << out;
  for (const char* task : {"ps0", "ps1", "worker0", "worker1"}) {
    EXPECT_EQ(absl::StrContains(run.stderr_of[task], "Shutdown RPC: the job is done"), true)
        << task << "\n" << run.stderr_of[task];
  }
}

// ps1 is SIGKILLed in epoch 3, after ps0 has taken pushes past the epoch-2 checkpoint, and
// restarted a second later (as an orchestrator restarts a failed pod). The functions that
// failed on it make the chief pause the workers, wait for ps1 to answer, recreate its
// shards from the newest checkpoint and run those functions again; training continues and
// the job ends as every other: every step of every epoch run, every task exiting 0.
TEST(CustomLoopRecoveryTest, AKilledPsIsRestoredFromTheNewestCheckpointAndTrainingGoesOn) {
  const std::string dir = FreshTestDir("killed_ps");
  ProcessGroup group;
  group.SetRestartPolicy(RestartLikeAnOrchestrator, absl::Seconds(1));
  const Cluster cluster =
      StartCluster(group, {"--job=" + Job("killed_ps_job"), "--epochs=5",
                           "--strategy=parameter_server", "--checkpoint_dir=" + dir});
  ASSERT_EQ(cluster.size(), 3u);
  std::unique_ptr<PsClient> ps0 = CreateGrpcPsClient(0, cluster[1].second[0], absl::Seconds(5));
  std::string newest;          // the newest checkpoint the chief wrote so far
  std::string before_kill;     // ... when ps1 was killed
  std::string restored_from;   // what the chief says it restored ps1 from
  int64_t pushes_at_checkpoint = -1;
  bool killed = false;
  ProcessRun run;
  run.exits = group.Wait(
      absl::Minutes(4), absl::Seconds(30),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        if (name != "chief" || !is_stderr) return;
        if (absl::StrContains(line, " written (epoch ")) {
          newest = WordAfter(line, "checkpoint ");
          if (pushes_at_checkpoint < 0 && absl::StrContains(line, " written (epoch 2,")) {
            absl::StatusOr<PsStatusResponse> s = ps0->GetStatus();
            pushes_at_checkpoint = s.ok() ? s->pushes() : -1;
          }
        }
        if (absl::StrContains(line, "came back empty; its shards restored from ")) {
          restored_from = WordAfter(line, "came back empty; its shards restored from ");
        }
      },
      [&]() {
        // Mid-epoch 3: ps0 took 20 more pushes since the epoch-2 checkpoint.
        if (killed || pushes_at_checkpoint < 0) return false;
        absl::StatusOr<PsStatusResponse> s = ps0->GetStatus();
        if (s.ok() && s->pushes() >= pushes_at_checkpoint + 20) {
          before_kill = newest;
          EXPECT_TRUE(group.Signal("ps1", SIGKILL).ok());
          killed = true;
        }
        return false;
      });
  const std::string& log = run.stderr_of["chief"];
  const std::string& out = run.stdout_of["chief"];
  ASSERT_TRUE(killed) << log;
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
    EXPECT_EQ(exit.restarts, exit.name == "ps1" ? 1 : 0) << exit.name;
  }
  // Restored from the checkpoint that was the newest when ps1 died (epoch 2's, or epoch
  // 3's if it was written between the kill and the recovery).
  ASSERT_FALSE(restored_from.empty()) << log;
  EXPECT_TRUE(restored_from == before_kill || absl::StrContains(restored_from, "ckpt-600"))
      << restored_from << " vs " << before_kill << "\n" << log;
  EXPECT_EQ(ParseEpochLosses(out).size(), 5u) << out;
  EXPECT_TRUE(absl::StrContains(out, "Epoch 5/5")) << out;
}

}  // namespace
}  // namespace pstrain
