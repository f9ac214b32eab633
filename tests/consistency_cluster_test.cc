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

// A job's "wire_dtype": bfloat16 pushes carry 2 bytes per element, counted by each ps's
// own metrics (a float32 push carries 4), the sync accounting stays exact (every update
// the mean of both workers' gradients of its version), and the model still learns.
TEST(ConsistencyClusterTest, Bfloat16PushesCarryHalfTheBytesWithExactSyncAccounting) {
  const int epochs = 3;
  ClusterRun run = RunTinyCluster(
      WriteTinyJob("sync_bf16", {{"wire_dtype", "bfloat16"},
                                 {"consistency",
                                  {{"mode", "sync"}, {"replicas_to_aggregate", 2},
                                   {"timeout_ms", 20000}}}}),
      epochs, absl::ZeroDuration());
  ASSERT_EQ(run.ps.size(), 2u);
  for (const auto& [index, ps] : run.ps) {
    SCOPED_TRACE(absl::StrCat("ps ", index));
    EXPECT_EQ(ps.pushes(), 2 * kStepsPerShard * epochs);
    EXPECT_EQ(ps.stale_gradients(), 0);
    EXPECT_EQ(ps.sync_partial_updates(), 0);
    int64_t applied = 0;
    int64_t elements = 0;
    for (const VariableInfo& v : ps.variables()) {
      EXPECT_EQ(v.version(), kStepsPerShard * epochs) << v.name();
      applied += v.version();
      int64_t n = 1;
      for (int64_t d : v.shape()) n *= d;
      elements += n;
    }
    EXPECT_EQ(ps.sync_full_updates(), applied);
    EXPECT_EQ(ps.sync_aggregated_gradients(), 2 * applied);
    // Every push carried each of this ps's variables whole, 2 bytes an element.
    EXPECT_EQ(ps.received_bytes(), ps.pushes() * elements * 2);
  }
  const std::vector<double> losses = ParseEpochLosses(run.processes.stdout_of["chief"]);
  ASSERT_EQ(losses.size(), static_cast<size_t>(epochs));
  EXPECT_LT(losses.back(), losses.front()) << run.processes.stdout_of["chief"];
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

// The tiny job's cluster training an Embedding of `table_rows` x 16 in sync mode: 8 ids
// per example from a Zipf vocabulary of 1,000 (common/data/zipf_ids.h), whatever the
// table's size, so every step touches the same rows of a small or a large table.
std::string WriteSyncEmbeddingJob(const std::string& name, int64_t table_rows) {
  const nlohmann::json zipf = {{"type", "zipf_ids"}, {"samples", 2000},   {"features", nullptr},
                               {"ids_per_example", 8}, {"vocabulary", 1000}, {"classes", 10},
                               {"exponent", 1.1},     {"noise", 0.3},       {"seed", 7},
                               {"stream", 0}};
  nlohmann::json validation = zipf;
  validation["samples"] = 1000;
  validation["stream"] = 1;
  validation.erase("features");
  return WriteTinyJob(
      name,
      {{"model",
        {{"config",
          {{"name", "sync_embedding"},
           {"layers",
            {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 8}}}}},
             {{"class_name", "Embedding"},
              {"config", {{"name", "embedding"}, {"input_dim", table_rows}, {"output_dim", 16}}}},
             {{"class_name", "GlobalAveragePooling1D"}, {"config", {{"name", "pool"}}}},
             {{"class_name", "Dense"},
              {"config",
               {{"name", "classes"}, {"units", 10}, {"activation", "softmax"}}}}}}}}}},
       {"compile", {{"optimizer", {{"class_name", "Adagrad"}, {"config", {{"learning_rate", 0.5}}}}}}},
       {"data", {{"train", zipf}, {"validation", validation}}},
       {"consistency", {{"mode", "sync"}, {"replicas_to_aggregate", 2}, {"timeout_ms", 20000}}}});
}

// Sync mode moves an Embedding's rows, not its table: the ps tasks aggregate the rows the
// workers push per shard and version. The same job with a 1,000-row and a 200,000-row
// table: every step's bytes pushed, counted by each ps's own metrics, are the same (the
// batches touch the same rows), far below one table (12.8 MB), and every variable, each
// table shard among them, took one full aggregate of both workers per step (a worker
// whose batch missed a shard still joins its aggregate), none partial or stale; and the
// model learns.
TEST(ConsistencyClusterTest, SyncWithAnEmbeddingPushesRowsNotTheTable) {
  const int epochs = 3;
  struct Figures {
    int64_t received_bytes = 0;
    int64_t steps = 0;
  };
  auto run_with = [&](int64_t table_rows) {
    SCOPED_TRACE(absl::StrCat(table_rows, " rows"));
    ClusterRun run = RunTinyCluster(
        WriteSyncEmbeddingJob(absl::StrCat("sync_embedding_", table_rows), table_rows), epochs,
        absl::ZeroDuration());
    Figures figures;
    EXPECT_EQ(run.ps.size(), 2u);
    int64_t table_elements = 0;
    for (const auto& [index, ps] : run.ps) {
      SCOPED_TRACE(absl::StrCat("ps ", index));
      EXPECT_EQ(ps.consistency_mode(), CONSISTENCY_SYNC);
      EXPECT_EQ(ps.stale_gradients(), 0);
      EXPECT_EQ(ps.consistency_timeouts(), 0);
      EXPECT_EQ(ps.sync_partial_updates(), 0);
      int64_t applied = 0;
      for (const VariableInfo& v : ps.variables()) {
        if (figures.steps == 0) figures.steps = v.version();
        EXPECT_EQ(v.version(), figures.steps) << v.name();
        applied += v.version();
        if (v.name().rfind("embedding/", 0) == 0) table_elements += v.shape(0) * v.shape(1);
      }
      EXPECT_EQ(ps.sync_full_updates(), applied);
      EXPECT_EQ(ps.sync_aggregated_gradients(), 2 * applied);
      figures.received_bytes += ps.received_bytes();
    }
    EXPECT_EQ(table_elements, table_rows * 16);
    // 1,000 examples a worker in batches of 32.
    EXPECT_EQ(figures.steps, 32 * epochs);
    const std::vector<double> losses = ParseEpochLosses(run.processes.stdout_of["chief"]);
    if (losses.size() == static_cast<size_t>(epochs)) {
      EXPECT_LT(losses.back(), losses.front()) << run.processes.stdout_of["chief"];
    }
    return figures;
  };
  const Figures small = run_with(1000);
  const Figures large = run_with(200000);
  ASSERT_GT(small.steps, 0);
  // Both workers pushed every step to both ps; the same rows and dense gradients each time
  // (equal in the runs seen; 10% leaves room for a retried call, and a table that moved
  // whole would be 200 times larger).
  EXPECT_LE(large.received_bytes, small.received_bytes * 11 / 10);
  EXPECT_GE(large.received_bytes, small.received_bytes * 9 / 10);
  const int64_t per_worker_step = large.received_bytes / (2 * large.steps);
  EXPECT_GT(per_worker_step, (16 * 10 + 10) * 4);  // the Dense layer, and some rows
  EXPECT_LT(per_worker_step, 200000 * 16 * 4 / 100) << "bytes per worker and step";
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

// Overlap (the job's "overlap": true), asynchronous: each worker computes a step while
// its previous push is in flight, yet every step a chunk reported was applied exactly
// once (RunSteps waits for its last exchange), and every push carried the versions it was
// computed at: the ps counts each one's lag, which overlap makes at least 1 (the worker's
// own previous push) after the first.
TEST(ConsistencyClusterTest, AsyncOverlapAppliesEveryStepOnceAndShowsItsLag) {
  const int epochs = 3;
  ClusterRun run = RunTinyCluster(WriteTinyJob("overlap", {{"overlap", true}}), epochs,
                                  absl::ZeroDuration());
  ASSERT_EQ(run.ps.size(), 2u);
  for (const auto& [index, ps] : run.ps) {
    SCOPED_TRACE(absl::StrCat("ps ", index));
    EXPECT_EQ(ps.consistency_mode(), CONSISTENCY_ASYNC);
    EXPECT_EQ(ps.pushes(), 2 * kStepsPerShard * epochs);
    for (const VariableInfo& v : ps.variables()) EXPECT_EQ(v.version(), ps.pushes()) << v.name();
    EXPECT_EQ(ps.push_lag_pushes(), ps.pushes());
    EXPECT_GE(ps.push_lag_max(), 1);
    // A chunk's second step (--steps_per_call=2) lags by its first at least: each worker
    // runs several such chunks an epoch.
    EXPECT_GE(ps.push_lag_sum(), 2 * epochs);
    ExpectPushesNamedByWorker(ps, epochs);
  }
}

}  // namespace
}  // namespace pstrain
