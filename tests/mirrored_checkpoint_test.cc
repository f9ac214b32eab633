// Checkpoints of the synchronous strategies, with the real train/train binary as separate
// processes: multi_worker_mirrored (two workers, TF_CONFIG only) resumes where its last
// checkpoint left off and ends bit-identical to a run that never stopped; a worker killed
// mid-run stops the other, naming it, and both restarted continue from the last
// checkpoint, step for step; mirrored with two local replicas resumes, skips
// a corrupt newest checkpoint; and a parameter-server cluster and a mirrored job continue
// from each other's checkpoints.

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

constexpr char kTinyJob[] = "--job=tests/testdata/tiny_synthetic.json";

// Runs both workers to the end; expects both to exit 0.
ProcessRun RunTwoWorkers(const std::vector<std::string>& args) {
  ProcessGroup group;
  StartMirroredWorkers(group, 2, args);
  ProcessRun run = CollectRun(group, absl::Minutes(3), absl::Seconds(10));
  EXPECT_EQ(run.exits.size(), 2u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
    EXPECT_EQ(exit.signal, 0) << exit.name;
  }
  return run;
}

// One train/train process (mirrored or default) run to the end.
ProcessRun RunOne(const std::vector<std::string>& args) {
  ProcessGroup group;
  EXPECT_TRUE(group.Start({"train", "train/train", args, {{"OPENBLAS_NUM_THREADS", "1"}}}).ok());
  return CollectRun(group, absl::Minutes(3), absl::Seconds(10));
}

// Every tensor of two checkpoints, compared bit for bit.
void ExpectSameTensors(const std::string& a, const std::string& b) {
  absl::StatusOr<std::unique_ptr<CheckpointReader>> ra = CheckpointReader::Open(a);
  absl::StatusOr<std::unique_ptr<CheckpointReader>> rb = CheckpointReader::Open(b);
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ((*ra)->step(), (*rb)->step());
  EXPECT_EQ((*ra)->epoch(), (*rb)->epoch());
  ASSERT_EQ((*ra)->tensors().size(), (*rb)->tensors().size());
  for (const NamedTensor& t : (*ra)->tensors()) {
    absl::StatusOr<const Tensor*> other = (*rb)->Get(t.name);
    ASSERT_TRUE(other.ok()) << t.name;
    EXPECT_EQ(t.tensor.shape(), (*other)->shape()) << t.name;
    EXPECT_TRUE(t.tensor.values() == (*other)->values()) << t.name << " differs";
  }
}

// The figures of the "Epoch k/n ..." line of an output (from " - loss: " on: the timing
// before them differs from run to run), or "" when there is none.
std::string EpochLine(const std::string& out, int k, int n) {
  const std::string head = absl::StrCat("Epoch ", k, "/", n, " ");
  const size_t at = out.find(head);
  if (at == std::string::npos) return "";
  const std::string line = out.substr(at, out.find('\n', at) - at);
  const size_t figures = line.find(" - loss: ");
  return figures == std::string::npos ? line : line.substr(figures);
}

TEST(MirroredCheckpointTest, TwoWorkersResumeWhereTheLastCheckpointLeftOff) {
  const std::string resumed_dir = FreshTestDir("resumed");
  const std::string straight_dir = FreshTestDir("straight");
  ProcessRun first = RunTwoWorkers({kTinyJob, "--epochs=2", "--checkpoint_dir=" + resumed_dir});
  EXPECT_NE(first.stdout_of["worker0"].find("Epoch 2/2"), std::string::npos);
  EXPECT_NE(first.stderr_of["worker0"].find("no checkpoint in " + resumed_dir),
            std::string::npos);
  // Only worker 0 writes.
  EXPECT_NE(first.stderr_of["worker0"].find("checkpoint " + resumed_dir + "/ckpt-"),
            std::string::npos);
  EXPECT_EQ(first.stderr_of["worker1"].find("written"), std::string::npos);

  ProcessRun second = RunTwoWorkers({kTinyJob, "--epochs=4", "--checkpoint_dir=" + resumed_dir});
  const std::string& out = second.stdout_of["worker0"];
  EXPECT_EQ(out.find("Epoch 1/4"), std::string::npos) << out;
  EXPECT_EQ(out.find("Epoch 2/4"), std::string::npos) << out;
  EXPECT_NE(out.find("Epoch 3/4"), std::string::npos) << out;
  EXPECT_NE(out.find("Epoch 4/4"), std::string::npos) << out;
  EXPECT_NE(second.stderr_of["worker0"].find("restored " + resumed_dir + "/ckpt-26 (epoch 2, "
                                              "step 26); continuing with epoch 3"),
            std::string::npos)
      << second.stderr_of["worker0"];
  // Worker 1 never read the folder: rank 0 sent it the state.
  EXPECT_NE(second.stderr_of["worker1"].find("restored rank 0's checkpoint (epoch 2, step 26)"),
            std::string::npos)
      << second.stderr_of["worker1"];

  // The same job without a stop: same epoch lines, and the same final weights, slots and
  // counts bit for bit, so what was loaded was exactly what the checkpoint held.
  ProcessRun straight =
      RunTwoWorkers({kTinyJob, "--epochs=4", "--checkpoint_dir=" + straight_dir});
  EXPECT_EQ(EpochLine(out, 3, 4), EpochLine(straight.stdout_of["worker0"], 3, 4));
  EXPECT_EQ(EpochLine(out, 4, 4), EpochLine(straight.stdout_of["worker0"], 4, 4));
  EXPECT_NE(EpochLine(out, 4, 4), "");
  ExpectSameTensors(resumed_dir, straight_dir);

  // Everything done: nothing to train, exit 0.
  ProcessRun third = RunTwoWorkers({kTinyJob, "--epochs=4", "--checkpoint_dir=" + resumed_dir});
  EXPECT_EQ(third.stdout_of["worker0"].find("Epoch"), std::string::npos);
  EXPECT_NE(third.stderr_of["worker0"].find("already has all 4 epochs, nothing to train"),
            std::string::npos)
      << third.stderr_of["worker0"];

  // The tools read a mirrored checkpoint as they read the chief's.
  ProcessGroup tools;
  ASSERT_TRUE(tools
                  .Start({"evaluate", "tools/evaluate",
                          {"--checkpoint=" + resumed_dir, "--data=train"}, {}})
                  .ok());
  ProcessRun evaluated = CollectRun(tools, absl::Minutes(1), absl::Seconds(5));
  ASSERT_EQ(evaluated.exits.size(), 1u);
  EXPECT_EQ(evaluated.exits[0].exit_code, 0) << evaluated.stderr_of["evaluate"];
  EXPECT_NE(evaluated.stdout_of["evaluate"].find("(epoch 4, step 52)"), std::string::npos)
      << evaluated.stdout_of["evaluate"];
}

// A worker killed mid-run stops the other, which names it; both restarted continue from
// the checkpoint of the last epoch worker 0 printed before the kill (epoch 2, or a later
// one when the kill landed late), and end with the job's last epoch. On the tiny job of
// 2000 samples, 63 steps an epoch: resuming exactly is the claim here (the first test of
// this file shows a resumed run ends bit-identical to one that never stopped).
TEST(MirroredCheckpointTest, AKilledWorkerStopsTheJobAndARestartContinuesFromTheCheckpoint) {
  const std::string dir = FreshTestDir("killed");
  const std::string job =
      WriteTinyJob("killed_job", {{"data", {{"train", {{"samples", 2000}}}}}});
  constexpr int kEpochs = 6;
  constexpr int kStepsPerEpoch = 63;  // 2000 samples in global batches of 32
  const std::vector<std::string> args = {
      "--job=" + job, absl::StrCat("--epochs=", kEpochs),
      "--collective_timeout=" + absl::FormatDuration(ScaledForSanitizers(absl::Seconds(5))),
      "--checkpoint_dir=" + dir};
  std::vector<std::string> addresses;
  int last_printed = 0;
  {
    ProcessGroup group;
    addresses = StartMirroredWorkers(group, 2, args);
    // Worker 0 prints the epoch line before it writes that epoch's checkpoint, but it
    // writes it before its next collective, so epoch 2's checkpoint is always complete.
    const SignalOnLine kill{"worker0", "Epoch 2/", "worker1", SIGKILL};
    // The grace outlasts the deadline that makes worker 0 give up on the dead one.
    ProcessRun run = CollectRun(group, absl::Minutes(3), ScaledForSanitizers(absl::Seconds(30)),
                                &kill);
    ASSERT_TRUE(run.signalled) << run.stderr_of["worker0"];
    ASSERT_EQ(run.exits.size(), 2u);
    EXPECT_EQ(run.exits[1].signal, SIGKILL);
    EXPECT_EQ(run.exits[0].signal, 0) << "worker0 had to be killed";
    EXPECT_EQ(run.exits[0].exit_code, 1) << run.stderr_of["worker0"];
    EXPECT_NE(run.stderr_of["worker0"].find("worker 1 (" + addresses[1] + ")"),
              std::string::npos)
        << run.stderr_of["worker0"];
    last_printed = static_cast<int>(ParseEpochLosses(run.stdout_of["worker0"]).size());
    ASSERT_GE(last_printed, 2) << run.stdout_of["worker0"];
    ASSERT_LT(last_printed, kEpochs) << "the job ended before the kill\n"
                                     << run.stdout_of["worker0"];
  }
  // Both restarted (new ports; --restore=latest is the default).
  ProcessRun again = RunTwoWorkers(args);
  const std::string& out = again.stdout_of["worker0"];
  EXPECT_NE(again.stderr_of["worker0"].find(absl::StrCat(
                "(epoch ", last_printed, ", step ", last_printed * kStepsPerEpoch,
                "); continuing with epoch ", last_printed + 1)),
            std::string::npos)
      << again.stderr_of["worker0"];
  EXPECT_EQ(out.find(absl::StrCat("Epoch ", last_printed, "/")), std::string::npos) << out;
  EXPECT_EQ(static_cast<int>(ParseEpochLosses(out).size()), kEpochs - last_printed) << out;
  EXPECT_NE(out.find(absl::StrCat("Epoch ", kEpochs, "/", kEpochs)), std::string::npos) << out;
}

TEST(MirroredCheckpointTest, LocalReplicasResumeAndSkipACorruptNewestCheckpoint) {
  const std::string dir = FreshTestDir("mirrored");
  const std::vector<std::string> base = {kTinyJob, "--strategy=mirrored", "--devices=cpu:0,cpu:1",
                                         "--checkpoint_dir=" + dir};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ProcessRun first = RunOne(with({"--epochs=2"}));
  ASSERT_EQ(first.exits.size(), 1u);
  EXPECT_EQ(first.exits[0].exit_code, 0) << first.stderr_of["train"];
  ProcessRun second = RunOne(with({"--epochs=3"}));
  EXPECT_EQ(second.exits[0].exit_code, 0) << second.stderr_of["train"];
  EXPECT_NE(second.stderr_of["train"].find("(epoch 2, step 26); continuing with epoch 3"),
            std::string::npos)
      << second.stderr_of["train"];
  EXPECT_EQ(second.stdout_of["train"].find("Epoch 2/3"), std::string::npos);
  EXPECT_NE(second.stdout_of["train"].find("Epoch 3/3"), std::string::npos);

  // Corrupt the newest (epoch 3): reported in one line, epoch 2's is used instead.
  {
    std::fstream f(dir + "/ckpt-39/data-00000", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(100);
    f.write("XXXX", 4);
  }
  ProcessRun third = RunOne(with({"--epochs=4"}));
  EXPECT_EQ(third.exits[0].exit_code, 0) << third.stderr_of["train"];
  const std::string& err = third.stderr_of["train"];
  const size_t report = err.find("ckpt-39");
  ASSERT_NE(report, std::string::npos) << err;
  EXPECT_EQ(err.rfind('\n', report) == std::string::npos ? 0 : err.rfind('\n', report) + 1,
            err.rfind("E ", report))
      << "not one error line: " << err;
  EXPECT_NE(err.find("previous good checkpoint " + dir + "/ckpt-26"), std::string::npos) << err;
  EXPECT_NE(err.find("restored " + dir + "/ckpt-26 (epoch 2"), std::string::npos) << err;
  EXPECT_NE(third.stdout_of["train"].find("Epoch 3/4"), std::string::npos);
  EXPECT_NE(third.stdout_of["train"].find("Epoch 4/4"), std::string::npos);

  // --restore=none starts afresh; --restore=PATH takes that one.
  ProcessRun fresh = RunOne(with({"--epochs=1", "--restore=none", "--keep_checkpoints=5"}));
  EXPECT_NE(fresh.stdout_of["train"].find("Epoch 1/1"), std::string::npos);
  ProcessRun from_path = RunOne(with({"--epochs=2", "--restore=" + dir + "/ckpt-13"}));
  EXPECT_NE(from_path.stderr_of["train"].find("restored " + dir + "/ckpt-13 (epoch 1"),
            std::string::npos)
      << from_path.stderr_of["train"];
  EXPECT_NE(from_path.stdout_of["train"].find("Epoch 2/2"), std::string::npos);
}

// The formats are one: a parameter-server cluster continues a mirrored job's checkpoint,
// and a mirrored job continues the cluster's.
TEST(MirroredCheckpointTest, AParameterServerJobAndAMirroredJobContinueEachOther) {
  const std::string dir = FreshTestDir("crossed");
  ProcessRun mirrored = RunOne({kTinyJob, "--strategy=mirrored", "--devices=cpu:0,cpu:1",
                                "--epochs=1", "--checkpoint_dir=" + dir});
  ASSERT_EQ(mirrored.exits[0].exit_code, 0) << mirrored.stderr_of["train"];

  LocalClusterOptions options;
  options.bin_dir = ".";
  options.num_ps = 2;
  options.num_workers = 1;
  options.chief_args = {kTinyJob, "--epochs=2", "--checkpoint_dir=" + dir};
  ProcessGroup group;
  ASSERT_TRUE(StartLocalCluster(options, &group).ok());
  ProcessRun cluster = CollectRun(group, absl::Minutes(2), absl::Seconds(10));
  for (const auto& exit : cluster.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << cluster.stderr_of[exit.name];
  }
  EXPECT_NE(cluster.stderr_of["chief"].find("restored " + dir + "/ckpt-13 (epoch 1, step 13)"),
            std::string::npos)
      << cluster.stderr_of["chief"];
  EXPECT_NE(cluster.stdout_of["chief"].find("Epoch 2/2"), std::string::npos);
  EXPECT_EQ(cluster.stdout_of["chief"].find("Epoch 1/2"), std::string::npos);

  ProcessRun back = RunOne({kTinyJob, "--epochs=3", "--checkpoint_dir=" + dir});
  EXPECT_EQ(back.exits[0].exit_code, 0) << back.stderr_of["train"];
  EXPECT_NE(back.stderr_of["train"].find("(epoch 2, "), std::string::npos)
      << back.stderr_of["train"];
  EXPECT_NE(back.stdout_of["train"].find("Epoch 3/3"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
