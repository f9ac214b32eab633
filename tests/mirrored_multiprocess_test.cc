// The synchronous strategies as real processes: train/train --strategy=mirrored (one
// process, two CPU replicas) and --strategy=multi_worker_mirrored (two processes, each
// configured only by TF_CONFIG, all-reducing over gRPC on loopback), on Fashion-MNIST;
// and a worker killed mid-run making the other stop, naming it, within the deadline.

#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

TEST(MirroredMultiprocessTest, TwoWorkersTrainFashionMnistInSync) {
  ProcessGroup group;
  StartMirroredWorkers(group, 2, {"--job=examples/fashion_mnist.json", "--epochs=3"});
  ProcessRun run = CollectRun(group, absl::Minutes(8), absl::Seconds(30));
  ASSERT_EQ(run.exits.size(), 2u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  const std::string& out = run.stdout_of["worker0"];
  // fit.batch_size (64) is the global batch, split across the 2 workers' replicas, so an
  // epoch has the 938 steps of one replica with batch 64.
  EXPECT_NE(out.find("num_replicas_in_sync=2 (worker 0, worker 1), global batch 64 (32 per "
                     "replica x 2)\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Epoch 3/3 - 938/938 "), std::string::npos) << out;
  EXPECT_GE(LastValAccuracy(out), 0.85) << out;
  // Only worker 0 reports.
  EXPECT_EQ(run.stdout_of["worker1"].find("Epoch"), std::string::npos);
}

TEST(MirroredMultiprocessTest, TwoLocalReplicasTrainFashionMnist) {
  ProcessGroup group;
  ASSERT_TRUE(group
                  .Start({"train", "train/train",
                          {"--job=examples/fashion_mnist.json", "--epochs=3",
                           "--strategy=mirrored", "--devices=cpu:0,cpu:1"},
                          {}})
                  .ok());
  ProcessRun run = CollectRun(group, absl::Minutes(8), absl::Seconds(30));
  ASSERT_EQ(run.exits.size(), 1u);
  EXPECT_EQ(run.exits[0].exit_code, 0) << run.stderr_of["train"];
  const std::string& out = run.stdout_of["train"];
  EXPECT_NE(out.find("num_replicas_in_sync=2 (cpu:0, cpu:1), global batch 64 (32 per replica x "
                     "2)\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Epoch 3/3 - 938/938 "), std::string::npos) << out;
  EXPECT_GE(LastValAccuracy(out), 0.85) << out;
}

// The collective deadline of the tests below: long enough that no healthy all-reduce of
// the tiny job misses it on a loaded machine (it takes milliseconds), times the sanitizer's
// slowdown.
absl::Duration CollectiveTimeout() { return ScaledForSanitizers(absl::Seconds(6)); }

std::string CollectiveTimeoutFlag() {
  return "--collective_timeout=" + absl::FormatDuration(CollectiveTimeout());
}

TEST(MirroredMultiprocessTest, AKilledWorkerIsNamedByTheOtherWithinTheDeadline) {
  ProcessGroup group;
  const std::vector<std::string> addresses = StartMirroredWorkers(
      group, 2,
      {"--job=tests/testdata/tiny_synthetic.json", "--epochs=100000", CollectiveTimeoutFlag()});
  const SignalOnLine kill{"worker0", "Epoch 3/", "worker1", SIGKILL};
  ProcessRun run = CollectRun(group, absl::Minutes(3), absl::Seconds(30), &kill);
  auto& err = run.stderr_of;
  auto& exits = run.exits;
  ASSERT_TRUE(run.signalled) << err["worker0"];
  // Detected within the deadline: the time worker0 logged its failure, after the kill
  // (both times from this machine's clock, the failure's as worker0 recorded it). The
  // bound allows a loaded machine; a hang would take the group's minutes.
  const absl::StatusOr<absl::Time> failed_at =
      LogLineTime(FirstLineWith(err["worker0"], "] train: "), run.signalled_at);
  ASSERT_TRUE(failed_at.ok()) << failed_at.status() << "\n" << err["worker0"];
  EXPECT_GE(*failed_at - run.signalled_at, absl::Milliseconds(-5)) << err["worker0"];
  EXPECT_LT(*failed_at - run.signalled_at, CollectiveTimeout() + absl::Seconds(15))
      << err["worker0"];
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[1].signal, SIGKILL);
  EXPECT_EQ(exits[0].signal, 0) << "worker0 had to be killed";
  EXPECT_EQ(exits[0].exit_code, 1) << err["worker0"];
  EXPECT_NE(err["worker0"].find("worker 1 (" + addresses[1] + ")"), std::string::npos)
      << err["worker0"];
}

// A worker that stalls (SIGSTOP: alive, connected, silent) is named when the deadline passes.
TEST(MirroredMultiprocessTest, AStalledWorkerIsNamedWhenTheDeadlinePasses) {
  ProcessGroup group;
  const std::vector<std::string> addresses = StartMirroredWorkers(
      group, 2,
      {"--job=tests/testdata/tiny_synthetic.json", "--epochs=100000", CollectiveTimeoutFlag()});
  bool stopped = false;
  absl::Time stopped_at;
  std::map<std::string, std::string> err;
  auto exits = group.Wait(
      absl::Minutes(3), absl::Seconds(1),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        if (is_stderr) err[name] += line + "\n";
        if (name == "worker0" && !is_stderr && absl::StartsWith(line, "Epoch 3/") && !stopped) {
          stopped = true;
          stopped_at = absl::Now();
          ASSERT_TRUE(group.Signal("worker1", SIGSTOP).ok());
        }
      },
      nullptr);
  ASSERT_TRUE(stopped) << err["worker0"];
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].signal, 0) << "worker0 had to be killed";
  EXPECT_EQ(exits[0].exit_code, 1) << err["worker0"];
  // When worker0 itself logged the failure, against when worker1 was stopped: the
  // deadline, less the part of the collective already waited for when the stop came,
  // and no hang. That part is how far worker1 lagged behind worker0 at the stop, a step
  // or so of the tiny job; a third of the deadline allows a lag of seconds on a loaded
  // machine and still fails a deadline that fires at once or in the wrong unit. A late
  // reading of the pipe by this test changes neither bound.
  const absl::StatusOr<absl::Time> failed_at =
      LogLineTime(FirstLineWith(err["worker0"], "] train: "), stopped_at);
  ASSERT_TRUE(failed_at.ok()) << failed_at.status() << "\n" << err["worker0"];
  EXPECT_GE(*failed_at - stopped_at, CollectiveTimeout() / 3) << err["worker0"];
  EXPECT_LT(*failed_at - stopped_at, CollectiveTimeout() + absl::Seconds(15)) << err["worker0"];
  EXPECT_NE(err["worker0"].find("worker 1 (" + addresses[1] + ")"), std::string::npos)
      << err["worker0"];
}

// With a chief in TF_CONFIG the chief is rank 0 of the ring (as in TensorFlow) and the one
// that reports; the worker stays quiet.
TEST(MirroredMultiprocessTest, AChiefTakesPartAndReports) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(2);
  ASSERT_TRUE(ports.ok());
  const std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {absl::StrCat("localhost:", (*ports)[0])}},
      {"worker", {absl::StrCat("localhost:", (*ports)[1])}}};
  ProcessGroup group;
  for (const auto& [type, name] : std::vector<std::pair<std::string, std::string>>{
           {"chief", "chief"}, {"worker", "worker0"}}) {
    ASSERT_TRUE(group
                    .Start({name, "train/train",
                            {"--job=tests/testdata/tiny_synthetic.json", "--epochs=2",
                             "--strategy=multi_worker_mirrored"},
                            {{"TF_CONFIG", MakeTfConfig(cluster, type, 0)}}})
                    .ok());
  }
  ProcessRun run = CollectRun(group, absl::Minutes(2), absl::Seconds(30));
  ASSERT_EQ(run.exits.size(), 2u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  EXPECT_NE(run.stdout_of["chief"].find("(chief 0, worker 0)"), std::string::npos)
      << run.stdout_of["chief"];
  EXPECT_NE(run.stdout_of["chief"].find("Epoch 2/2"), std::string::npos);
  EXPECT_EQ(run.stdout_of["worker0"], "");
}

}  // namespace
}  // namespace pstrain
