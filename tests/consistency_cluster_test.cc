// The parameter-server consistency modes checked against the ps's own account of a run:
// the three real binaries as processes (1 chief, 2 ps, 2 workers) train the tiny job, and
// each ps logs its final status (the GetStatus answer) as it exits. Every assertion rests
// on the context a worker sends with each push (its name, epoch, step and versions): a
// worker that sent none would fail each of these tests.

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"
#include "tests/ps_final_status.h"

namespace pstrain {
namespace {

// The tiny job: 400 samples in 2 shards of 200, batch 32, so each shard is 7 steps an
// epoch; 4 variables (2 Dense layers), whole, spread over the 2 ps.
constexpr int kStepsPerShard = 7;

struct ClusterRun {
  ProcessRun processes;
  std::map<int, PsStatusResponse> ps;  // each ps's final status, by task index
};

// Trains `job` for `epochs` on 1 chief, 2 ps and 2 workers as processes; worker 1 sleeps
// `worker1_delay` after every step (a straggler). Every process must exit 0.
ClusterRun RunTinyCluster(const std::string& job, int epochs, absl::Duration worker1_delay) {
  ClusterRun result;
  // The consistency waits (20 s) fit inside the RPC deadline, as the chief requires; no
  // wait should come near either.
  ProcessGroup group;
  StartTestCluster(group, 2, 2,
                   {"--heartbeat_interval=200ms", "--chief_timeout=20s", "--rpc_timeout=60s"},
                   {"--job=" + job, absl::StrCat("--epochs=", epochs), "--steps_per_call=2"},
                   {{1, {"--testing_step_delay=" + absl::FormatDuration(worker1_delay)}}});
  result.processes = CollectRun(group, absl::Minutes(4), absl::Seconds(10));
  for (const auto& exit : result.processes.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << result.processes.stderr_of[exit.name];
  }
  EXPECT_EQ(ParseEpochLosses(result.processes.stdout_of["chief"]).size(),
            static_cast<size_t>(epochs))
      << result.processes.stdout_of["chief"];
  for (int i = 0; i < 2; ++i) {
    const std::map<int, PsStatusResponse> one =
        FinalPsStatuses(result.processes.stderr_of[absl::StrCat("ps", i)]);
    EXPECT_EQ(one.size(), 1u) << result.processes.stderr_of[absl::StrCat("ps", i)];
    if (one.count(i)) result.ps[i] = one.at(i);
  }
  return result;
}

// Every push names its worker and the (epoch, step) it computed at: both workers appear,
// their pushes add up to the ps's, and the latest positions are of the last epoch, within
// a shard's steps, one of them its last step.
void ExpectPushesNamedByWorker(const PsStatusResponse& ps, int epochs) {
  ASSERT_EQ(ps.workers_size(), 2) << ps.DebugString();
  EXPECT_EQ(ps.workers(0).worker(), "worker 0");
  EXPECT_EQ(ps.workers(1).worker(), "worker 1");
  EXPECT_EQ(ps.workers(0).pushes() + ps.workers(1).pushes(), ps.pushes());
  int64_t last_step = 0;
  for (const WorkerPushes& w : ps.workers()) {
    EXPECT_GT(w.pushes(), 0) << w.worker();
    EXPECT_EQ(w.epoch(), epochs - 1) << w.worker();
    EXPECT_LT(w.step(), kStepsPerShard) << w.worker();
    last_step = std::max(last_step, w.step());
  }
  EXPECT_EQ(last_step, kStepsPerShard - 1) << ps.DebugString();
}

// SyncReplicasOptimizer: with both workers aggregated (R = 2), every update a ps applied
// is the mean of exactly 2 gradients of the variable's current version: one update per
// step of the pair, none partial, none stale.
TEST(ConsistencyClusterTest, SyncAppliesTheMeanOfExactlyRGradientsOfOneVersion) {
  const int epochs = 3;
  ClusterRun run = RunTinyCluster(
      WriteTinyJob("sync", {{"consistency",
                             {{"mode", "sync"}, {"replicas_to_aggregate", 2},
                              {"timeout_ms", 20000}}}}),
      epochs, absl::ZeroDuration());
  ASSERT_EQ(run.ps.size(), 2u);
  int64_t variables = 0;
  for (const auto& [index, ps] : run.ps) {
    SCOPED_TRACE(absl::StrCat("ps ", index));
    EXPECT_EQ(ps.consistency_mode(), CONSISTENCY_SYNC);
    // Each worker pushed once a step, to every ps.
    EXPECT_EQ(ps.pushes(), 2 * kStepsPerShard * epochs);
    EXPECT_EQ(ps.stale_gradients(), 0);
    EXPECT_EQ(ps.consistency_timeouts(), 0);
    EXPECT_EQ(ps.sync_partial_updates(), 0);
    int64_t applied = 0;
    for (const VariableInfo& v : ps.variables()) {
      EXPECT_EQ(v.version(), kStepsPerShard * epochs) << v.name();
      applied += v.version();
    }
    EXPECT_EQ(ps.sync_full_updates(), applied);
    EXPECT_EQ(ps.sync_aggregated_gradients(), 2 * applied);
    variables += ps.variables_size();
    ExpectPushesNamedByWorker(ps, epochs);
  }
  EXPECT_EQ(variables, 4);
}

// With R = 1 and worker 1 slow, a gradient computed at a version another push has since
// replaced is dropped and counted: every gradient the ps received was either applied
// (one update each) or counted stale, and some were stale: the two workers start every
// epoch from the weights of their own last push, and only one of those is current.
TEST(ConsistencyClusterTest, SyncDropsAndCountsStaleGradients) {
  const int epochs = 3;
  ClusterRun run = RunTinyCluster(
      WriteTinyJob("sync_stale", {{"consistency",
                                   {{"mode", "sync"}, {"replicas_to_aggregate", 1},
                                    {"timeout_ms", 20000}}}}),
      epochs, absl::Milliseconds(100));
  ASSERT_EQ(run.ps.size(), 2u);
  for (const auto& [index, ps] : run.ps) {
    SCOPED_TRACE(absl::StrCat("ps ", index));
    EXPECT_EQ(ps.pushes(), 2 * kStepsPerShard * epochs);
    // At least one whole push (every variable it carried) was stale.
    EXPECT_GE(ps.stale_gradients(), ps.variables_size());
    EXPECT_EQ(ps.sync_partial_updates(), 0);
    int64_t applied = 0;
    for (const VariableInfo& v : ps.variables()) applied += v.version();
    EXPECT_EQ(ps.sync_full_updates(), applied);
    EXPECT_EQ(ps.sync_aggregated_gradients(), applied);
    EXPECT_EQ(ps.pushes() * ps.variables_size(), applied + ps.stale_gradients());
    ExpectPushesNamedByWorker(ps, epochs);
  }
}

// Stale synchronous parallel with K = 1 and worker 1 slowed down: the fast worker had to
// wait, and no push was applied more than 1 step ahead of the slowest live worker of its
// epoch; every push was applied on its own (one version each).
TEST(ConsistencyClusterTest, BoundedStalenessHoldsTheFastWorkerWithinKSteps) {
  const int epochs = 3;
  ClusterRun run = RunTinyCluster(
      WriteTinyJob("bounded", {{"consistency",
                                {{"mode", "bounded_staleness"}, {"staleness", 1},
                                 {"timeout_ms", 20000}}}}),
      epochs, absl::Milliseconds(100));
  ASSERT_EQ(run.ps.size(), 2u);
  for (const auto& [index, ps] : run.ps) {
    SCOPED_TRACE(absl::StrCat("ps ", index));
    EXPECT_EQ(ps.consistency_mode(), CONSISTENCY_BOUNDED_STALENESS);
    EXPECT_EQ(ps.pushes(), 2 * kStepsPerShard * epochs);
    EXPECT_GT(ps.consistency_waits(), 0);
    EXPECT_LE(ps.max_staleness_applied(), 1);
    EXPECT_EQ(ps.consistency_timeouts(), 0);
    for (const VariableInfo& v : ps.variables()) EXPECT_EQ(v.version(), ps.pushes()) << v.name();
    ExpectPushesNamedByWorker(ps, epochs);
  }
}

}  // namespace
}  // namespace pstrain
