#include "ps_server/variable_store.h"

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

OptimizerConfig Sgd(float lr) {
  OptimizerConfig config;
  config.set_name("sgd");
  config.set_learning_rate(lr);
  return config;
}

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

TEST(VariableStoreTest, PullReturnsCreatedValue) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({2}, {1, 2})}}, Sgd(0.5)).ok());
  std::vector<int64_t> versions;
  auto values = store.Pull({"w"}, &versions);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(versions, (std::vector<int64_t>{0}));
}

TEST(VariableStoreTest, PushAppliesSgdAndBumpsVersion) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({2}, {1, 2})}}, Sgd(0.5)).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({2}, {2, -4})}}).ok());
  std::vector<int64_t> versions;
  auto values = store.Pull({"w"}, &versions);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{0, 4}));
  EXPECT_EQ(versions[0], 1);
  EXPECT_EQ(store.num_pushes(), 1);
}

// Async: the versions a push carries are information only. Each push that carries one
// per gradient counts its lag (version applied at minus computed at, the largest over its
// variables); one without them, or with a version that cannot be a lag (negative, ahead
// of the variable's, or not one per gradient), is applied and left out of the count.
TEST(VariableStoreTest, AsyncPushesCountTheLagTheirVersionsShow) {
  VariableStore store;
  ASSERT_TRUE(store
                  .CreateVariables({{"w", Tensor({2}, {1, 2})}, {"b", Tensor({1}, {0})}},
                                   Sgd(0.5))
                  .ok());
  auto push = [&store](std::vector<int64_t> versions) {
    PushContext context;
    context.worker = "worker 0";
    context.versions = std::move(versions);
    return store.Push({{"w", Tensor({2}, {1, 1})}, {"b", Tensor({1}, {1})}}, context);
  };
  ASSERT_TRUE(push({0, 0}).ok());  // computed at the current versions: lag 0
  ASSERT_TRUE(push({0, 0}).ok());  // misses one update: lag 1
  ASSERT_TRUE(push({0, 2}).ok());  // w misses two (the largest counts), b none
  EXPECT_EQ(store.push_lag_pushes(), 3);
  EXPECT_EQ(store.push_lag_sum(), 3);
  EXPECT_EQ(store.push_lag_max(), 2);
  ASSERT_TRUE(push({}).ok());
  ASSERT_TRUE(push({3}).ok());
  ASSERT_TRUE(push({-1, 3}).ok());
  ASSERT_TRUE(push({std::numeric_limits<int64_t>::min(), 0}).ok());
  ASSERT_TRUE(push({0, 1000}).ok());
  EXPECT_EQ(store.num_pushes(), 8);  // every push applied
  EXPECT_EQ(store.push_lag_pushes(), 3);
  EXPECT_EQ(store.push_lag_sum(), 3);
  EXPECT_EQ(store.push_lag_max(), 2);
  EXPECT_EQ(DescribeStore(store).push_lag_max(), 2);
}

TEST(VariableStoreTest, WrongShapePushIsInvalidArgumentAndChangesNothing) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"a", Tensor({2}, {1, 2})}, {"b", Tensor({1}, {5})}},
                                    Sgd(1)).ok());
  // The first gradient is fine, the second has the wrong shape: neither may be applied.
  absl::Status status = store.Push({{"a", Tensor({2}, {1, 1})}, {"b", Tensor({2}, {1, 1})}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("\"b\""), std::string::npos) << status;
  auto values = store.Pull({"a", "b"}, nullptr);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values((*values)[1]), (std::vector<float>{5}));
}

TEST(VariableStoreTest, UnknownVariableIsNotFound) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {1})}}, Sgd(1)).ok());
  EXPECT_EQ(store.Pull({"nope"}, nullptr).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Push({{"nope", Tensor({1}, {1})}}).code(), absl::StatusCode::kNotFound);
  auto values = store.Pull({"w"}, nullptr);
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{1}));
}

TEST(VariableStoreTest, PushBeforeCreateIsFailedPrecondition) {
  VariableStore store;
  EXPECT_EQ(store.Push({{"w", Tensor({1}, {1})}}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(VariableStoreTest, RecreateKeepsValueButOtherShapeIsAlreadyExists) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {1})}}, Sgd(1)).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}).ok());
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {9})}}, Sgd(1)).ok());
  EXPECT_EQ(Values((*store.Pull({"w"}, nullptr))[0]), (std::vector<float>{0}));
  EXPECT_EQ(store.CreateVariables({{"w", Tensor({2}, {1, 1})}}, Sgd(1)).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store.CreateVariables({{"v", Tensor({1}, {1})}}, Sgd(2)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(VariableStoreTest, BadCreateRequestsAreRejected) {
  VariableStore store;
  EXPECT_EQ(store.CreateVariables({{"", Tensor({1}, {1})}}, Sgd(1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.CreateVariables({{"w", Tensor({1}, {1})}, {"w", Tensor({1}, {1})}}, Sgd(1)).code(),
            absl::StatusCode::kInvalidArgument);
  OptimizerConfig unknown;
  unknown.set_name("sgdd");
  EXPECT_EQ(store.CreateVariables({{"w", Tensor({1}, {1})}}, unknown).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.List().empty());
}

// Rows [begin, end) of a uniform [-1, 1) variable of `shape`.
InitialShard Drawn(const std::string& name, std::vector<int64_t> shape, int64_t begin,
                   int64_t end) {
  InitialShard shard;
  shard.name = name;
  shard.init.distribution = InitialDistribution::kUniform;
  shard.init.a = -1.0;
  shard.init.b = 1.0;
  shard.init.seed = 11;
  shard.init.shape = std::move(shape);
  shard.row_begin = begin;
  shard.row_end = end;
  return shard;
}

// The chief sends how to draw a shard, not its values: the ps draws its rows, exactly
// the rows of the whole variable drawn at once.
TEST(VariableStoreTest, DrawsItsOwnRowsOfAVariableFromItsInitializer) {
  VariableStore store;
  ASSERT_TRUE(store
                  .CreateVariables({{"b", Tensor({2}, {1, 2})}}, {Drawn("t/part_1", {10, 3}, 4, 10)},
                                   Sgd(1), ConsistencyConfig())
                  .ok());
  auto values = store.Pull({"t/part_1", "b"}, nullptr);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ((*values)[0].shape(), (std::vector<int64_t>{6, 3}));
  const absl::StatusOr<Tensor> whole = DrawShard(Drawn("t", {10, 3}, 0, 10));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(Values((*values)[0]),
            std::vector<float>(whole->values().begin() + 12, whole->values().end()));
  EXPECT_EQ(Values((*values)[1]), (std::vector<float>{1, 2}));
  // A repeated create keeps the (trained) value; other rows are another shape.
  ASSERT_TRUE(store.Push({{"t/part_1", Tensor({6, 3})}}).ok());
  Tensor ones({6, 3});
  for (float& x : ones.values()) x = 1.0f;
  ASSERT_TRUE(store.Push({{"t/part_1", ones}}).ok());
  const std::vector<float> trained = Values((*store.Pull({"t/part_1"}, nullptr))[0]);
  ASSERT_TRUE(store.CreateVariables({}, {Drawn("t/part_1", {10, 3}, 4, 10)}, Sgd(1),
                                    ConsistencyConfig())
                  .ok());
  EXPECT_EQ(Values((*store.Pull({"t/part_1"}, nullptr))[0]), trained);
  EXPECT_EQ(store.CreateVariables({}, {Drawn("t/part_1", {10, 3}, 5, 10)}, Sgd(1),
                                  ConsistencyConfig())
                .code(),
            absl::StatusCode::kAlreadyExists);
}

// Everything a hostile create could carry is refused before any value is drawn (a table
// of 2^60 floats would take the ps down) and creates nothing.
TEST(VariableStoreTest, BadInitializersAreRefusedBeforeAnythingIsDrawn) {
  VariableStore store;
  InitialShard nan = Drawn("n", {4}, 0, 4);
  nan.init.b = std::nan("");
  InitialShard kind = Drawn("k", {4}, 0, 4);
  kind.init.distribution = static_cast<InitialDistribution>(9);
  const std::vector<std::pair<InitialShard, std::string>> invalid = {
      {Drawn("r", {4, 2}, 2, 5), "rows [2, 5)"},
      {Drawn("e", {4, 2}, 2, 2), "rows [2, 2)"},
      {Drawn("z", {4, 0}, 0, 4), "below 1"},
      {Drawn("o", {int64_t{1} << 62, 4}, 0, 1), "too many elements"},
      {nan, "finite"},
      {kind, "unknown"},
      {Drawn("", {4}, 0, 4), "empty name"},
  };
  for (const auto& [shard, expected] : invalid) {
    const absl::Status status = store.CreateVariables({}, {shard}, Sgd(1), ConsistencyConfig());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << expected << ": " << status;
    EXPECT_NE(status.message().find(expected), std::string::npos) << status;
  }
  // A name in both lists, or twice among the drawn.
  EXPECT_EQ(store.CreateVariables({{"w", Tensor({4})}}, {Drawn("w", {4}, 0, 4)}, Sgd(1),
                                  ConsistencyConfig())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.CreateVariables({}, {Drawn("w", {4}, 0, 2), Drawn("w", {4}, 2, 4)}, Sgd(1),
                                  ConsistencyConfig())
                .code(),
            absl::StatusCode::kInvalidArgument);
  // 2^60 floats fit a tensor but no ps: refused by the memory budget, not by bad_alloc.
  const absl::Status huge = store.CreateVariables(
      {}, {Drawn("small", {8}, 0, 8), Drawn("huge", {int64_t{1} << 40, 1 << 20}, 0, int64_t{1} << 40)},
      Sgd(1), ConsistencyConfig());
  EXPECT_EQ(huge.code(), absl::StatusCode::kResourceExhausted) << huge;
  EXPECT_NE(huge.message().find("\"huge\""), std::string::npos) << huge;
  EXPECT_TRUE(store.List().empty());
  EXPECT_TRUE(store.optimizer_config().name().empty());  // nothing was set either
}

TEST(VariableStoreTest, ConcurrentPushesAreNeverLostAndPullsNeverTorn) {
  // Four threads push 1 to every element of a large variable with SGD(lr=1) while a
  // reader pulls: every element of a pulled value must be equal (never half-applied),
  // and the final value counts every push exactly once.
  constexpr int kElements = 1 << 16;
  constexpr int kThreads = 4;
  constexpr int kPushes = 200;
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({kElements})}}, Sgd(1)).ok());
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!done) {
      auto values = store.Pull({"w"}, nullptr);
      const Tensor& t = (*values)[0];
      for (int i = 1; i < kElements; ++i) {
        if (t.data()[i] != t.data()[0]) {
          ++torn;
          break;
        }
      }
    }
  });
  std::vector<std::thread> pushers;
  for (int p = 0; p < kThreads; ++p) {
    pushers.emplace_back([&] {
      Tensor ones({kElements}, std::vector<float>(kElements, 1.0f));
      for (int i = 0; i < kPushes; ++i) ASSERT_TRUE(store.Push({{"w", ones}}).ok());
    });
  }
  for (auto& t : pushers) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  const Tensor final_value = (*store.Pull({"w"}, nullptr))[0];
  EXPECT_EQ(final_value.data()[0], -static_cast<float>(kThreads * kPushes));
  EXPECT_EQ(final_value.data()[kElements - 1], -static_cast<float>(kThreads * kPushes));
}

// A non-trainable variable (BatchNormalization's moving statistics) is updated by its
// moving-average rule, also as shards and in sync mode; the others by the optimizer.
TEST(VariableStoreTest, MovingAverageVariablesFoldInTheirObservations) {
  OptimizerConfig config = Sgd(0.5);
  MovingAverageVariable* rule = config.add_moving_averages();
  rule->set_variable("bn/moving_mean");
  rule->set_momentum(0.75f);
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({2}, {1, 2})},
                                     {"bn/moving_mean", Tensor({2}, {0, 8})},
                                     {"bn/moving_mean/part_1", Tensor({1}, {4})}},
                                    config)
                  .ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({2}, {2, 2})},
                          {"bn/moving_mean", Tensor({2}, {4, 0})},
                          {"bn/moving_mean/part_1", Tensor({1}, {0})}})
                  .ok());
  auto values = store.Pull({"w", "bn/moving_mean", "bn/moving_mean/part_1"}, nullptr);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{0, 1}));  // sgd: w - 0.5 g
  EXPECT_EQ(Values((*values)[1]), (std::vector<float>{1, 6}));  // 0.75 v + 0.25 o
  EXPECT_EQ(Values((*values)[2]), (std::vector<float>{3}));
  auto state = store.ReadState({"bn/moving_mean"});
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)[0].iterations, 1);
  EXPECT_TRUE((*state)[0].slots.empty());
  // The rules are part of the optimizer configuration a ps serves.
  EXPECT_EQ(store.CreateVariables({{"v", Tensor({1}, {1})}}, Sgd(0.5)).code(),
            absl::StatusCode::kInvalidArgument);
  OptimizerConfig twice = config;
  *twice.add_moving_averages() = *rule;
  EXPECT_EQ(VariableStore().CreateVariables({{"w", Tensor({1}, {1})}}, twice).code(),
            absl::StatusCode::kInvalidArgument);
}

ConsistencyConfig Sync(int replicas, int64_t timeout_ms) {
  ConsistencyConfig config;
  config.set_mode(CONSISTENCY_SYNC);
  config.set_replicas_to_aggregate(replicas);
  config.set_timeout_ms(timeout_ms);
  return config;
}

ConsistencyConfig Bounded(int staleness, int64_t timeout_ms) {
  ConsistencyConfig config;
  config.set_mode(CONSISTENCY_BOUNDED_STALENESS);
  config.set_staleness(staleness);
  config.set_timeout_ms(timeout_ms);
  return config;
}

PushContext At(const std::string& worker, int64_t step, std::vector<int64_t> versions = {}) {
  PushContext context;
  context.worker = worker;
  context.step = step;
  context.versions = std::move(versions);
  return context;
}

TEST(VariableStoreSyncTest, AppliesTheMeanOfReplicasOnceAndDropsStale) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({2}, {10, 20})}}, Sgd(1), Sync(2, 10000)).ok());
  absl::Status first;
  std::thread a([&] { first = store.Push({{"w", Tensor({2}, {2, 4})}}, At("a", 0, {0})); });
  ASSERT_TRUE(store.Push({{"w", Tensor({2}, {4, 8})}}, At("b", 0, {0})).ok());
  a.join();
  ASSERT_TRUE(first.ok()) << first;
  std::vector<int64_t> versions;
  auto values = store.Pull({"w"}, &versions);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{7, 14}));  // w - (g1 + g2) / 2
  EXPECT_EQ(versions[0], 1);

  // Computed at version 0, which is gone: dropped, counted, returns at once.
  ASSERT_TRUE(store.Push({{"w", Tensor({2}, {100, 100})}}, At("a", 1, {0})).ok());
  values = store.Pull({"w"}, &versions);
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{7, 14}));
  EXPECT_EQ(versions[0], 1);
  EXPECT_EQ(store.stale_gradients(), 1);
  EXPECT_EQ(DescribeStore(store).stale_gradients(), 1);
  EXPECT_EQ(DescribeStore(store).consistency_mode(), CONSISTENCY_SYNC);
  // One update, of both gradients; every push counted under its worker's name.
  const PsStatusResponse status = DescribeStore(store);
  EXPECT_EQ(status.sync_full_updates(), 1);
  EXPECT_EQ(status.sync_partial_updates(), 0);
  EXPECT_EQ(status.sync_aggregated_gradients(), 2);
  ASSERT_EQ(status.workers_size(), 2);
  EXPECT_EQ(status.workers(0).worker(), "a");
  EXPECT_EQ(status.workers(0).pushes(), 2);
  EXPECT_EQ(status.workers(0).step(), 1);
  EXPECT_EQ(status.workers(1).worker(), "b");
  EXPECT_EQ(status.workers(1).pushes(), 1);
  EXPECT_EQ(status.workers(1).step(), 0);
}

// A peer that names every push differently cannot grow the per-worker table without
// bound: past 1024 names the rest are counted together.
TEST(VariableStoreTest, PushesByWorkerKeepAtMost1024NamesAndCountTheRest) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {0})}}, Sgd(1)).ok());
  for (int i = 0; i < 1030; ++i) {
    ASSERT_TRUE(store.Push({{"w", Tensor({1}, {0})}}, At("w" + std::to_string(i), i)).ok());
  }
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {0})}}, At("w7", 5000)).ok());
  const PsStatusResponse status = DescribeStore(store);
  ASSERT_EQ(status.workers_size(), 1025);
  int64_t total = 0;
  for (const WorkerPushes& w : status.workers()) {
    total += w.pushes();
    if (w.worker() == "(other workers)") {
      EXPECT_EQ(w.pushes(), 6);
    }
    if (w.worker() == "w7") {
      EXPECT_EQ(w.pushes(), 2);
      EXPECT_EQ(w.step(), 5000);
    }
  }
  EXPECT_EQ(total, 1031);
}

// Until `condition` holds (polled every millisecond), or a minute passes (false): a test
// waits for the event itself, never a fixed time that a loaded machine may not keep.
bool WaitUntil(const std::function<bool()>& condition) {
  const absl::Time end = absl::Now() + absl::Minutes(1);
  while (!condition()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(VariableStoreSyncTest, ALonePushIsAppliedAfterTheTimeout) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {5})}}, Sgd(1), Sync(2, 100)).ok());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {3})}}, At("a", 0, {0})).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  EXPECT_EQ(store.consistency_timeouts(), 1);
  std::vector<int64_t> versions;
  auto values = store.Pull({"w"}, &versions);
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{2}));
  EXPECT_EQ(versions[0], 1);
  // An update of 1 gradient where 2 were asked for: partial.
  EXPECT_EQ(store.sync_full_updates(), 0);
  EXPECT_EQ(store.sync_partial_updates(), 1);
  EXPECT_EQ(store.sync_aggregated_gradients(), 1);
}

// A worker that pushed before and then fell silent for the timeout (killed) no longer
// counts towards the aggregate: the survivor's gradient is applied at once instead of
// after a timeout at every step. Back, it counts again.
TEST(VariableStoreSyncTest, AWorkerSilentForTheTimeoutNoLongerCountsTowardsTheAggregate) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {10})}}, Sgd(1), Sync(2, 3000)).ok());
  absl::Status first;
  std::thread a([&] { first = store.Push({{"w", Tensor({1}, {2})}}, At("a", 0, {0})); });
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {4})}}, At("b", 0, {0})).ok());
  a.join();
  ASSERT_TRUE(first.ok());
  absl::SleepFor(absl::Milliseconds(3100));  // both silent now; "b" stays so
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("a", 1, {1})).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("a", 2, {2})).ok());
  // Neither push waited for "b" until the timeout.
  EXPECT_EQ(store.consistency_timeouts(), 0);
  std::vector<int64_t> versions;
  auto values = store.Pull({"w"}, &versions);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{5}));  // 10 - 3 - 1 - 1
  EXPECT_EQ(versions[0], 3);
  // "b" pushes again: two gradients make an aggregate once more (one alone waits).
  const int64_t waits_before = store.consistency_waits();
  std::atomic<bool> applied{false};
  std::thread b([&] {
    EXPECT_TRUE(store.Push({{"w", Tensor({1}, {2})}}, At("b", 3, {3})).ok());
    applied = true;
  });
  // Its push has joined the aggregate and waits (counted before it waits), not applied.
  EXPECT_TRUE(WaitUntil([&] { return store.consistency_waits() == waits_before + 1; }));
  EXPECT_FALSE(applied.load());
  std::vector<int64_t> waiting_versions;
  ASSERT_TRUE(store.Pull({"w"}, &waiting_versions).ok());
  EXPECT_EQ(waiting_versions[0], 3);
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {4})}}, At("a", 3, {3})).ok());
  b.join();
  values = store.Pull({"w"}, &versions);
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{2}));  // 5 - (2 + 4) / 2
}

TEST(VariableStoreSyncTest, RequiresVersionsAndOneConfig) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {5})}}, Sgd(1), Sync(2, 100)).ok());
  EXPECT_EQ(store.Push({{"w", Tensor({1}, {3})}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.CreateVariables({{"v", Tensor({1}, {5})}}, Sgd(1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.CreateVariables({{"v", Tensor({1}, {5})}}, Sgd(1), Sync(2, 100)).ok());
}

TEST(VariableStoreStalenessTest, AWorkerTooFarAheadWaitsForTheSlowOne) {
  VariableStore store;
  ASSERT_TRUE(
      store.CreateVariables({{"w", Tensor({1}, {0})}}, Sgd(1), Bounded(2, 20000)).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("slow", 0)).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("fast", 2)).ok());  // 2 ahead: fine
  std::atomic<bool> done{false};
  std::thread fast([&] {
    EXPECT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("fast", 3)).ok());  // 3 ahead: waits
    done = true;
  });
  // The push counts its wait before it waits: from then on it must not be applied.
  EXPECT_TRUE(WaitUntil([&] { return store.consistency_waits() == 1; }));
  EXPECT_FALSE(done.load());
  EXPECT_EQ(store.num_pushes(), 2);
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("slow", 1)).ok());
  fast.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(store.num_pushes(), 4);
  // One push waited; none was applied more than 2 steps ahead of "slow".
  EXPECT_EQ(store.consistency_waits(), 1);
  EXPECT_EQ(store.max_staleness_applied(), 2);

  // A worker in a later epoch is done with this one and holds nobody back.
  PushContext next_epoch = At("slow", 0);
  next_epoch.epoch = 1;
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, next_epoch).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("fast", 9)).ok());
  EXPECT_EQ(store.consistency_timeouts(), 0);  // every wait ended by "slow" moving on
}

// A worker silent for longer than the timeout (killed, or done with its share of the
// epoch) is not live: the others no longer wait for it at all.
TEST(VariableStoreStalenessTest, AWorkerSilentForTheTimeoutHoldsNobodyBack) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {0})}}, Sgd(1), Bounded(2, 3000)).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("gone", 0)).ok());
  absl::SleepFor(absl::Milliseconds(3100));
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("fast", 10)).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("fast", 11)).ok());
  // Neither push waited for "gone" until the timeout.
  EXPECT_EQ(store.consistency_timeouts(), 0);
}

TEST(VariableStoreStalenessTest, ProceedsAfterTheTimeoutWhenTheSlowWorkerNeverPushes) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({1}, {0})}}, Sgd(1), Bounded(2, 100)).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("slow", 0)).ok());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(store.Push({{"w", Tensor({1}, {1})}}, At("fast", 3)).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  EXPECT_EQ(store.consistency_timeouts(), 1);
  EXPECT_EQ(DescribeStore(store).consistency_timeouts(), 1);
  // It went ahead 3 steps ahead of the (still live) slow worker, and the status says so.
  EXPECT_EQ(DescribeStore(store).consistency_waits(), 1);
  EXPECT_EQ(DescribeStore(store).max_staleness_applied(), 3);
  std::vector<int64_t> versions;
  ASSERT_TRUE(store.Pull({"w"}, &versions).ok());
  EXPECT_EQ(versions[0], 2);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

OptimizerConfig Adam() {
  OptimizerConfig config;
  config.set_name("adam");
  config.set_learning_rate(0.1f);
  return config;
}

std::vector<float> Floats(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

TEST(VariableStoreStateTest, ReadStateReturnsValueSlotsAndIterations) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({2}, {1, 2})}, {"b", Tensor({1}, {0})}},
                                    Adam())
                  .ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({2}, {1, -1})}}).ok());
  auto state = store.ReadState({});
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->size(), 2u);
  EXPECT_EQ((*state)[0].name, "b");  // every variable, by name
  const VariableStore::Snapshot& w = (*state)[1];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.version, 1);
  EXPECT_EQ(w.iterations, 1);
  ASSERT_EQ(w.slots.size(), 2u);
  EXPECT_EQ(w.slots[0].name, "momentum");
  EXPECT_EQ(w.slots[1].name, "velocity");
  EXPECT_EQ(w.slots[0].tensor.shape(), (std::vector<int64_t>{2}));
  EXPECT_NE(Floats(w.slots[0].tensor), (std::vector<float>{0, 0}));
  EXPECT_EQ(store.ReadState({"nope"}).status().code(), absl::StatusCode::kNotFound);
}

// VisitState lends what ReadState copies: the same values, slots and counts, in place
// (the view points into the store), and passes the visitor's error back.
TEST(VariableStoreStateTest, VisitStateLendsWhatReadStateCopies) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({2}, {1, 2})}}, Adam()).ok());
  ASSERT_TRUE(store.Push({{"w", Tensor({2}, {1, -1})}}).ok());
  auto copied = store.ReadState({"w"});
  ASSERT_TRUE(copied.ok()) << copied.status();
  const VariableStore::Snapshot& w = copied->front();
  const float* seen_first = nullptr;
  const absl::Status visited =
      store.VisitState("w", [&](const VariableStore::StateView& view) -> absl::Status {
        EXPECT_EQ(std::vector<float>(view.value.begin(), view.value.end()), Floats(w.value));
        EXPECT_EQ(view.shape, w.value.shape());
        EXPECT_EQ(view.version, w.version);
        EXPECT_EQ(view.iterations, w.iterations);
        EXPECT_EQ(view.slots.size(), w.slots.size());
        for (size_t i = 0; i < view.slots.size() && i < w.slots.size(); ++i) {
          EXPECT_EQ(view.slots[i].first, w.slots[i].name);
          EXPECT_EQ(std::vector<float>(view.slots[i].second.begin(), view.slots[i].second.end()),
                    Floats(w.slots[i].tensor));
        }
        seen_first = view.value.data();
        return absl::OkStatus();
      });
  EXPECT_TRUE(visited.ok()) << visited;
  // Borrowed, not copied: a second visit sees the same memory.
  const absl::Status again = store.VisitState("w", [&](const VariableStore::StateView& view) {
    EXPECT_EQ(view.value.data(), seen_first);
    return absl::DataLossError("from the visitor");
  });
  EXPECT_EQ(again.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store.VisitState("nope", [](const VariableStore::StateView&) {
                   return absl::OkStatus();
                 }).code(),
            absl::StatusCode::kNotFound);
}

// Restoring the state read from one store onto a fresh one makes the next update
// identical on both (Adam's slots and bias correction carry over).
TEST(VariableStoreStateTest, RestoreReproducesTheNextUpdate) {
  VariableStore a;
  ASSERT_TRUE(a.CreateVariables({{"w", Tensor({2}, {1, 2})}}, Adam()).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.Push({{"w", Tensor({2}, {0.5f, -1})}}).ok());
  auto saved = a.ReadState({"w"});
  ASSERT_TRUE(saved.ok());

  VariableStore b;
  ASSERT_TRUE(b.CreateVariables({{"w", Tensor({2}, {9, 9})}}, Adam()).ok());
  ASSERT_TRUE(b.RestoreState(*saved).ok());
  ASSERT_TRUE(a.Push({{"w", Tensor({2}, {0.25f, 2})}}).ok());
  ASSERT_TRUE(b.Push({{"w", Tensor({2}, {0.25f, 2})}}).ok());
  std::vector<int64_t> va, vb;
  auto wa = a.Pull({"w"}, &va);
  auto wb = b.Pull({"w"}, &vb);
  ASSERT_TRUE(wa.ok() && wb.ok());
  EXPECT_EQ(Floats((*wa)[0]), Floats((*wb)[0]));
  EXPECT_EQ(va, vb);
  EXPECT_EQ((*b.ReadState({"w"}))[0].iterations, 4);
}

TEST(VariableStoreStateTest, BadRestoreIsRejectedAndChangesNothing) {
  VariableStore store;
  EXPECT_EQ(store.RestoreState({}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store.CreateVariables({{"w", Tensor({2}, {1, 2})}, {"b", Tensor({1}, {0})}},
                                    Adam())
                  .ok());
  auto good = [] {
    VariableStore::Snapshot s;
    s.name = "b";
    s.value = Tensor({1}, {5});
    s.iterations = 7;
    return s;
  };
  VariableStore::Snapshot bad_shape;
  bad_shape.name = "w";
  bad_shape.value = Tensor({3});
  EXPECT_EQ(store.RestoreState({good(), bad_shape}).code(), absl::StatusCode::kInvalidArgument);

  VariableStore::Snapshot bad_slot;
  bad_slot.name = "w";
  bad_slot.value = Tensor({2});
  bad_slot.slots.push_back({"accumulator", Tensor({2})});
  EXPECT_EQ(store.RestoreState({good(), bad_slot}).code(), absl::StatusCode::kInvalidArgument);

  VariableStore::Snapshot bad_slot_shape;
  bad_slot_shape.name = "w";
  bad_slot_shape.value = Tensor({2});
  bad_slot_shape.slots.push_back({"momentum", Tensor({1})});
  EXPECT_EQ(store.RestoreState({good(), bad_slot_shape}).code(),
            absl::StatusCode::kInvalidArgument);

  VariableStore::Snapshot unknown;
  unknown.name = "nope";
  unknown.value = Tensor({1});
  EXPECT_EQ(store.RestoreState({good(), unknown}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.RestoreState({good(), good()}).code(), absl::StatusCode::kInvalidArgument);

  // None of the above touched "b".
  auto b = store.ReadState({"b"});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Floats((*b)[0].value), (std::vector<float>{0}));
  EXPECT_EQ((*b)[0].iterations, 0);

  ASSERT_TRUE(store.RestoreState({good()}).ok());
  b = store.ReadState({"b"});
  EXPECT_EQ(Floats((*b)[0].value), (std::vector<float>{5}));
  EXPECT_EQ((*b)[0].iterations, 7);
}

TEST(VariableStoreTest, SyncModeAveragesObservationsBeforeTheMovingAverage) {
  OptimizerConfig config = Sgd(1);
  MovingAverageVariable* rule = config.add_moving_averages();
  rule->set_variable("m");
  rule->set_momentum(0.5f);
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"m", Tensor({1}, {10})}}, config, Sync(2, 10000)).ok());
  PushContext a, b;
  a.worker = "a";
  b.worker = "b";
  a.versions = b.versions = {0};
  std::thread other([&] { EXPECT_TRUE(store.Push({{"m", Tensor({1}, {2})}}, a).ok()); });
  EXPECT_TRUE(store.Push({{"m", Tensor({1}, {6})}}, b).ok());
  other.join();
  auto values = store.Pull({"m"}, nullptr);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{7}));  // 0.5 * 10 + 0.5 * mean(2, 6)
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

OptimizerConfig Named(const std::string& name, float lr) {
  OptimizerConfig config;
  config.set_name(name);
  config.set_learning_rate(lr);
  return config;
}

// A 6 x 3 table with distinct values.
Tensor Table() {
  Tensor t({6, 3});
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data()[i] = 0.1f * static_cast<float>(i);
  return t;
}

TEST(VariableStoreRowsTest, PullRowsReturnsTheRowsAskedInOrder) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"emb", Table()}}, Sgd(1)).ok());
  int64_t version = -1;
  auto rows = store.PullRows("emb", std::vector<int64_t>{4, 0, 1}, &version);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->shape(), (std::vector<int64_t>{3, 3}));
  const Tensor table = Table();
  const float* t = table.data();
  EXPECT_EQ(Values(*rows), (std::vector<float>{t[12], t[13], t[14], t[0], t[1], t[2], t[3],
                                               t[4], t[5]}));
  EXPECT_EQ(version, 0);
  // A row asked twice would make the answer larger than the table can be: refused.
  auto repeated = store.PullRows("emb", std::vector<int64_t>{4, 0, 4}, &version);
  EXPECT_EQ(repeated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(repeated.status().message(),
            "row 4 of \"emb\" is asked more than once in one pull; ask each once");
}

TEST(VariableStoreRowsTest, SparseAndDensePushesGiveTheSameWeights) {
  // SGD exactly (the same float operations on the rows pushed, none elsewhere); Adagrad
  // too (a zero gradient leaves its accumulator and weight alone). Repeated rows are
  // summed before the update, as the dense gradient of an embedding lookup sums them.
  for (const char* optimizer : {"sgd", "adagrad"}) {
    SCOPED_TRACE(optimizer);
    VariableStore sparse, dense;
    ASSERT_TRUE(sparse.CreateVariables({{"emb", Table()}}, Named(optimizer, 0.5)).ok());
    ASSERT_TRUE(dense.CreateVariables({{"emb", Table()}}, Named(optimizer, 0.5)).ok());
    for (int step = 0; step < 3; ++step) {
      const float k = static_cast<float>(step + 1);
      // Rows 5, 1, 5 (5 repeated), 3.
      const std::vector<int64_t> rows = {5, 1, 5, 3};
      Tensor values({4, 3}, {k, -1, 0.5f, 2, 2, 2, -0.25f, k, 1, 0, 0, 3});
      ASSERT_TRUE(sparse.PushRows({{"emb", rows, values}}).ok());
      Tensor full({6, 3});
      for (size_t r = 0; r < rows.size(); ++r) {
        for (int c = 0; c < 3; ++c) full.data()[rows[r] * 3 + c] += values.data()[r * 3 + c];
      }
      ASSERT_TRUE(dense.Push({{"emb", full}}).ok());
    }
    std::vector<int64_t> sparse_versions, dense_versions;
    auto a = sparse.Pull({"emb"}, &sparse_versions);
    auto b = dense.Pull({"emb"}, &dense_versions);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(Values((*a)[0]), Values((*b)[0]));
    EXPECT_EQ(sparse_versions, dense_versions);
    // Rows 0, 2 and 4 were never pushed.
    EXPECT_EQ(Values(*sparse.PullRows("emb", std::vector<int64_t>{0, 2, 4}, nullptr)),
              Values(*dense.PullRows("emb", std::vector<int64_t>{0, 2, 4}, nullptr)));
    EXPECT_EQ((*a)[0].data()[0], 0.0f);
  }
}

TEST(VariableStoreRowsTest, AdamUpdatesOnlyThePushedRowsAndTheirSlots) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"emb", Tensor({3, 1}, {0, 0, 0})}}, Named("adam", 0.1))
                  .ok());
  ASSERT_TRUE(store.PushRows({{"emb", {0, 2}, Tensor({2, 1}, {1, -1})}}).ok());
  ASSERT_TRUE(store.PushRows({{"emb", {0}, Tensor({1, 1}, {-1})}}).ok());
  auto state = store.ReadState({"emb"});
  ASSERT_TRUE(state.ok()) << state.status();
  const std::vector<float> w = Values((*state)[0].value);
  // By hand (optimizer_test's Adam): row 0 after g = 1 then -1 is -0.09473684; row 2 kept
  // its first step, +0.1, and its moments (lazy Adam); row 1 never moved.
  EXPECT_NEAR(w[0], -0.09473684f, 1e-5);
  EXPECT_FLOAT_EQ(w[1], 0.0f);
  EXPECT_NEAR(w[2], 0.1f, 1e-5);
  EXPECT_EQ((*state)[0].iterations, 2);
}

TEST(VariableStoreRowsTest, BadRowPushesAreRefusedAndChangeNothing) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"emb", Table()}, {"b", Tensor({}, {1})}}, Sgd(1)).ok());
  const Tensor one_row({1, 3}, {1, 1, 1});
  struct Case {
    std::vector<SparseGradient> push;
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"emb", {6}, one_row}}, absl::StatusCode::kInvalidArgument, "row 6"},
      {{{"emb", {-1}, one_row}}, absl::StatusCode::kInvalidArgument, "row -1"},
      {{{"emb", {}, Tensor({0, 3})}}, absl::StatusCode::kInvalidArgument, "no rows"},
      {{{"emb", {1, 2}, one_row}}, absl::StatusCode::kInvalidArgument, "want [2,3]"},
      {{{"emb", {1}, Tensor({1, 2}, {1, 1})}}, absl::StatusCode::kInvalidArgument, "[1,2]"},
      {{{"emb", {1}, Tensor({1, 3}, {1, NAN, 1})}}, absl::StatusCode::kInvalidArgument,
       "emb"},
      {{{"b", {0}, Tensor({1}, {1})}}, absl::StatusCode::kInvalidArgument, "scalar"},
      {{{"nope", {0}, one_row}}, absl::StatusCode::kNotFound, "nope"},
      // A good gradient first, then a bad one: neither applies.
      {{{"emb", {0}, one_row}, {"emb", {1}, one_row}}, absl::StatusCode::kInvalidArgument,
       "twice"},
      {{{"emb", {0}, one_row}, {"emb2", {1}, one_row}}, absl::StatusCode::kNotFound, "emb2"},
  };
  for (const Case& c : cases) {
    absl::Status status = store.PushRows(c.push);
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status;
  }
  auto values = store.Pull({"emb"}, nullptr);
  EXPECT_EQ(Values((*values)[0]), Values(Table()));
  EXPECT_EQ(store.num_pushes(), 0);
  EXPECT_EQ(store.nonfinite_refused(), 1);
  EXPECT_EQ(store.PullRows("emb", std::vector<int64_t>{6}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.PullRows("emb", std::vector<int64_t>{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.PullRows("b", std::vector<int64_t>{0}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  // 2 rows of 12 bytes do not fit in 20.
  EXPECT_EQ(store.PullRows("emb", std::vector<int64_t>{0, 1}, nullptr, 20).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(VariableStoreRowsTest, RowPushesThatOverflowAreRefusedAndChangeNothing) {
  // Finite values whose update leaves the floats, as Push refuses them: Adam's velocity of
  // a 1e20 gradient (its square is 1e40), SGD's lr * g, and repeated rows whose sum does.
  VariableStore adam;
  ASSERT_TRUE(adam.CreateVariables({{"emb", Table()}, {"other", Table()}}, Named("adam", 0.1))
                  .ok());
  const Tensor big({1, 3}, {1e20f, 1, 1});
  const Tensor fine({1, 3}, {1, 1, 1});
  // The overflowing gradient comes second: the first variable must not move either.
  absl::Status refused = adam.PushRows({{"other", {0}, fine}, {"emb", {4}, big}});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("overflows"), std::string::npos) << refused;
  auto state = adam.ReadState({"emb", "other"});
  ASSERT_TRUE(state.ok());
  for (const auto& snapshot : *state) {
    EXPECT_EQ(Values(snapshot.value), Values(Table())) << snapshot.name;
    EXPECT_EQ(snapshot.iterations, 0);
    for (const NamedTensor& slot : snapshot.slots) {
      for (float v : slot.tensor.values()) EXPECT_EQ(v, 0.0f) << slot.name;
    }
  }
  VariableStore sgd;
  ASSERT_TRUE(sgd.CreateVariables({{"emb", Table()}}, Named("sgd", 1e10f)).ok());
  EXPECT_EQ(sgd.PushRows({{"emb", {1}, Tensor({1, 3}, {1e30f, 0, 0})}}).code(),
            absl::StatusCode::kInvalidArgument);
  VariableStore summed;
  ASSERT_TRUE(summed.CreateVariables({{"emb", Table()}}, Named("sgd", 1e-30f)).ok());
  absl::Status sum = summed.PushRows(
      {{"emb", {2, 2}, Tensor({2, 3}, {3e38f, 0, 0, 3e38f, 0, 0})}});
  EXPECT_EQ(sum.code(), absl::StatusCode::kInvalidArgument) << sum;
  EXPECT_NE(sum.message().find("repeated rows"), std::string::npos) << sum;
  EXPECT_EQ(Values((*sgd.Pull({"emb"}, nullptr))[0]), Values(Table()));
  EXPECT_EQ(Values((*summed.Pull({"emb"}, nullptr))[0]), Values(Table()));
  EXPECT_EQ(adam.num_pushes() + sgd.num_pushes() + summed.num_pushes(), 0);
}

TEST(VariableStoreRowsTest, ARetriedRowPushAppliesOnce) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"emb", Table()}}, Sgd(1)).ok());
  PushContext context;
  context.request_id = 77;
  const Tensor one_row({1, 3}, {1, 1, 1});
  ASSERT_TRUE(store.PushRows({{"emb", {2}, one_row}}, context).ok());
  ASSERT_TRUE(store.PushRows({{"emb", {2}, one_row}}, context).ok());
  EXPECT_EQ(store.duplicate_pushes(), 1);
  EXPECT_EQ(Values(*store.PullRows("emb", std::vector<int64_t>{2}, nullptr)),
            (std::vector<float>{Table().data()[6] - 1, Table().data()[7] - 1,
                                Table().data()[8] - 1}));

}

// Sync mode aggregates row pushes: three workers push rows of one table at each version
// (overlapping, one with a repeated row, one with no rows at all), and the table ends where
// the same gradients pushed densely (zeros elsewhere) leave it, to float rounding (the
// workers arrive in any order, and a float sum depends on it), with SGD and Adagrad.
TEST(VariableStoreRowsTest, SyncAggregatesRowPushesOfSeveralWorkersAsTheDenseMean) {
  for (const char* optimizer : {"sgd", "adagrad"}) {
    SCOPED_TRACE(optimizer);
    VariableStore by_rows, dense;
    ASSERT_TRUE(by_rows.CreateVariables({{"emb", Table()}}, Named(optimizer, 0.5), Sync(3, 60000))
                    .ok());
    ASSERT_TRUE(
        dense.CreateVariables({{"emb", Table()}}, Named(optimizer, 0.5), Sync(3, 60000)).ok());
    const std::vector<std::vector<int64_t>> rows = {{5, 1, 5, 3}, {1, 2}, {}};
    for (int step = 0; step < 3; ++step) {
      std::vector<std::thread> workers;
      std::vector<absl::Status> pushed(6);
      for (int w = 0; w < 3; ++w) {
        const float k = static_cast<float>(step + 1 + w);
        Tensor values({static_cast<int64_t>(rows[w].size()), 3});
        for (int64_t i = 0; i < values.num_elements(); ++i) {
          values.data()[i] = k * 0.5f - static_cast<float>(i) / 3.0f;
        }
        Tensor full({6, 3});
        for (size_t r = 0; r < rows[w].size(); ++r) {
          for (int c = 0; c < 3; ++c) full.data()[rows[w][r] * 3 + c] += values.data()[r * 3 + c];
        }
        const std::string name = absl::StrCat("worker ", w);
        workers.emplace_back([&, w, name, values, step] {
          pushed[w] = by_rows.PushRows({{"emb", rows[w], values}}, At(name, step, {step}));
        });
        workers.emplace_back([&, w, name, full, step] {
          pushed[3 + w] = dense.Push({{"emb", full}}, At(name, step, {step}));
        });
      }
      for (std::thread& t : workers) t.join();
      for (const absl::Status& status : pushed) ASSERT_TRUE(status.ok()) << status;
    }
    auto a = by_rows.ReadState({"emb"});
    auto b = dense.ReadState({"emb"});
    ASSERT_TRUE(a.ok() && b.ok());
    const std::vector<float> got = Values((*a)[0].value), want = Values((*b)[0].value);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
    // Rows 0 and 4 were never pushed: as they were.
    for (int64_t i : {0, 1, 2, 12, 13, 14}) EXPECT_EQ(got[i], Table().data()[i]) << i;
    EXPECT_EQ((*a)[0].version, 3);
    EXPECT_EQ((*a)[0].iterations, (*b)[0].iterations);
    ASSERT_EQ((*a)[0].slots.size(), (*b)[0].slots.size());
    for (size_t s = 0; s < (*a)[0].slots.size(); ++s) {
      const std::vector<float> got_slot = Values((*a)[0].slots[s].tensor);
      const std::vector<float> want_slot = Values((*b)[0].slots[s].tensor);
      for (size_t i = 0; i < got_slot.size(); ++i) EXPECT_NEAR(got_slot[i], want_slot[i], 1e-5);
    }
    const PsStatusResponse status = DescribeStore(by_rows);
    EXPECT_EQ(status.sync_full_updates(), 3);
    EXPECT_EQ(status.sync_partial_updates(), 0);
    EXPECT_EQ(status.sync_aggregated_gradients(), 9);
    EXPECT_EQ(status.consistency_timeouts(), 0);
  }
}

// In sync mode a bad row push is refused before it joins an aggregate (with one replica a
// push that joined would be applied at once and move the version); a push of no rows is
// a pusher that touched nothing, and a pull of no rows answers the version.
TEST(VariableStoreRowsTest, SyncRefusesBadRowPushesBeforeTheyJoin) {
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables({{"emb", Table()}}, Sgd(1), Sync(1, 60000)).ok());
  const Tensor one_row({1, 3}, {1, 1, 1});
  struct Case {
    std::vector<SparseGradient> push;
    std::vector<int64_t> versions;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"emb", {6}, one_row}}, {0}, "row 6"},
      {{{"emb", {-1}, one_row}}, {0}, "row -1"},
      {{{"emb", {1}, Tensor({1, 3}, {1, NAN, 1})}}, {0}, "emb"},
      {{{"emb", {1}, Tensor({1, 3}, {1, INFINITY, 1})}}, {0}, "emb"},
      {{{"emb", {1}, Tensor({1, 2}, {1, 1})}}, {0}, "[1,2]"},
      {{{"emb", {1, 2}, one_row}}, {0}, "want [2,3]"},
      {{{"emb", {1}, one_row}}, {}, "versions"},
      {{{"emb", {1}, one_row}}, {0, 0}, "versions"},
      {{{"emb", {0}, one_row}, {"emb", {1}, one_row}}, {0, 0}, "twice"},
      // Repeated rows whose sum overflows.
      {{{"emb", {2, 2}, Tensor({2, 3}, {3e38f, 0, 0, 3e38f, 0, 0})}}, {0}, "emb"},
  };
  for (const Case& c : cases) {
    absl::Status status = store.PushRows(c.push, At("w", 0, c.versions));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status;
  }
  auto state = store.ReadState({"emb"});
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(Values((*state)[0].value), Values(Table()));
  EXPECT_EQ((*state)[0].version, 0);
  EXPECT_EQ(store.num_pushes(), 0);
  EXPECT_EQ(DescribeStore(store).sync_aggregated_gradients(), 0);

  int64_t version = -1;
  auto none = store.PullRows("emb", std::vector<int64_t>{}, &version);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(version, 0);
  ASSERT_TRUE(store.PushRows({{"emb", {}, Tensor({0, 3})}}, At("w", 0, {0})).ok());
  state = store.ReadState({"emb"});
  EXPECT_EQ(Values((*state)[0].value), Values(Table()));
  EXPECT_EQ((*state)[0].version, 1);
  EXPECT_EQ((*state)[0].iterations, 1);
}

// Every element, slot, iteration count and version of `store`'s variables.
std::vector<std::vector<float>> Everything(const VariableStore& store) {
  std::vector<std::vector<float>> out;
  auto state = store.ReadState({});
  EXPECT_TRUE(state.ok()) << state.status();
  if (!state.ok()) return out;
  for (const auto& snapshot : *state) {
    out.push_back(Values(snapshot.value));
    out.push_back({static_cast<float>(snapshot.version), static_cast<float>(snapshot.iterations)});
    for (const NamedTensor& slot : snapshot.slots) out.push_back(Values(slot.tensor));
  }
  return out;
}

TEST(VariableStoreTest, APushWhoseLastElementOverflowsChangesNoVariableNorSlot) {
  for (bool skip : {false, true}) {
    OptimizerConfig adam = Named("adam", 0.1f);
    if (skip) adam.set_nonfinite(NONFINITE_SKIP);
    VariableStore store;
    ASSERT_TRUE(store.CreateVariables({{"a", Table()}, {"b", Table()}}, adam).ok());
    // One update first, so that the slots hold values an overflow could spoil.
    ASSERT_TRUE(store.Push({{"a", Table()}, {"b", Table()}}).ok());
    const std::vector<std::vector<float>> before = Everything(store);
    // Finite gradients; only the very last element of the second variable overflows
    // (Adam's velocity squares it: 1e40), after every other element's update was computed.
    Tensor last = Table();
    last.data()[last.num_elements() - 1] = 1e20f;
    absl::Status pushed = store.Push({{"a", Table()}, {"b", last}});
    if (skip) {
      EXPECT_TRUE(pushed.ok()) << pushed;
      EXPECT_EQ(store.nonfinite_skipped(), 1);
    } else {
      EXPECT_EQ(pushed.code(), absl::StatusCode::kInvalidArgument) << pushed;
      EXPECT_NE(pushed.message().find("\"b\""), std::string::npos) << pushed;
      EXPECT_EQ(store.nonfinite_refused(), 1);
    }
    EXPECT_EQ(Everything(store), before) << (skip ? "skip" : "refuse");
    EXPECT_EQ(store.num_pushes(), 1);
    // The same for rows: the last element of the last row of the last variable.
    Tensor rows({2, 3}, {1, 1, 1, 1, 1, 1e20f});
    pushed = store.PushRows({{"a", {0, 5}, Tensor({2, 3}, {1, 1, 1, 1, 1, 1})},
                             {"b", {0, 5}, rows}});
    EXPECT_EQ(pushed.ok(), skip) << pushed;
    EXPECT_EQ(Everything(store), before) << (skip ? "skip" : "refuse");
    EXPECT_EQ(store.num_pushes(), 1);
  }
}

// A dense update is computed aside and swapped in: what a refused push computed for the
// variables before the one that overflowed must never surface later, and row pushes and
// restores between dense ones must be built on. The store that saw the refused push ends
// equal, bit for bit, to one that never did.
TEST(VariableStoreTest, ARefusedPushLeavesNoTraceInTheUpdatesAfterIt) {
  VariableStore refused_one, reference;
  for (VariableStore* store : {&refused_one, &reference}) {
    ASSERT_TRUE(store->CreateVariables({{"a", Table()}, {"b", Table()}}, Named("adam", 0.1f))
                    .ok());
  }
  Tensor overflowing = Table();
  overflowing.data()[overflowing.num_elements() - 1] = 1e20f;
  Tensor half = Table();
  for (float& x : half.values()) x *= 0.5f;
  for (VariableStore* store : {&refused_one, &reference}) {
    ASSERT_TRUE(store->Push({{"a", Table()}, {"b", Table()}}).ok());
    if (store == &refused_one) {
      // "a"'s update is computed (and finite) before "b"'s overflows.
      EXPECT_EQ(store->Push({{"a", half}, {"b", overflowing}}).code(),
                absl::StatusCode::kInvalidArgument);
    }
    ASSERT_TRUE(store->PushRows({{"a", {1, 4}, Tensor({2, 3}, {1, 2, 3, 4, 5, 6})}}).ok());
    ASSERT_TRUE(store->Push({{"b", half}}).ok());
    ASSERT_TRUE(store->Push({{"a", half}, {"b", Table()}}).ok());
  }
  EXPECT_EQ(Everything(refused_one), Everything(reference));
  auto versions = [](const VariableStore& store) {
    std::vector<int64_t> out;
    for (const VariableStore::VariableInfo& info : store.List()) out.push_back(info.version);
    return out;
  };
  EXPECT_EQ(versions(refused_one), versions(reference));
  EXPECT_EQ(versions(reference), (std::vector<int64_t>{3, 3}));
  // A restore replaces the value the next update starts from.
  auto snapshot = reference.ReadState({});
  ASSERT_TRUE(snapshot.ok());
  ASSERT_TRUE(refused_one.Push({{"a", half}, {"b", half}}).ok());
  ASSERT_TRUE(refused_one.RestoreState(*snapshot).ok());
  for (VariableStore* store : {&refused_one, &reference}) {
    ASSERT_TRUE(store->Push({{"a", Table()}, {"b", half}}).ok());
  }
  EXPECT_EQ(Everything(refused_one), Everything(reference));
}

// A client that sends the optimizer's kind and an older one that sends its name (any
// case) set up the same optimizer; the status names it either way.
TEST(VariableStoreTest, TheOptimizerComesAsAKindOrAsAnOlderClientsName) {
  OptimizerConfig kind_only;
  kind_only.set_kind(OPTIMIZER_ADAM);
  kind_only.set_learning_rate(0.1f);
  VariableStore by_kind, by_name;
  ASSERT_TRUE(by_kind.CreateVariables({{"a", Table()}}, kind_only).ok());
  ASSERT_TRUE(by_name.CreateVariables({{"a", Table()}}, Named("Adam", 0.1f)).ok());
  EXPECT_EQ(by_kind.optimizer_name(), "adam");
  EXPECT_EQ(DescribeStore(by_kind).optimizer(), "adam");
  EXPECT_EQ(by_name.optimizer_name(), "adam");
  ASSERT_TRUE(by_kind.CreateVariables({{"a", Table()}}, kind_only).ok());  // a chief's repeat
  for (VariableStore* store : {&by_kind, &by_name}) {
    ASSERT_TRUE(store->Push({{"a", Table()}}).ok());
  }
  EXPECT_EQ(Everything(by_kind), Everything(by_name));
  OptimizerConfig unknown;
  unknown.set_kind(static_cast<OptimizerKind>(42));
  VariableStore refused;
  const absl::Status status = refused.CreateVariables({{"a", Table()}}, unknown);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("unknown optimizer kind 42"), std::string::npos) << status;
  EXPECT_TRUE(refused.List().empty());
}

TEST(VariableStoreTest, PushesOfTheSameVariablesInOtherOrdersNeitherDeadlockNorLoseUpdates) {
  // Every push holds the locks of all its variables across the check and the update:
  // pushes naming them in opposite orders must still all complete, each applied whole.
  VariableStore store;
  ASSERT_TRUE(store.CreateVariables(
                       {{"a", Tensor({2}, {0, 0})}, {"b", Tensor({2}, {0, 0})},
                        {"c", Tensor({2}, {0, 0})}},
                       Sgd(1.0f))
                  .ok());
  constexpr int kPushes = 2000;
  const std::vector<std::vector<std::string>> orders = {
      {"a", "b", "c"}, {"c", "b", "a"}, {"b", "a"}, {"c", "a"}};
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (const auto& order : orders) {
    threads.emplace_back([&store, &failures, order] {
      std::vector<NamedTensor> push;
      for (const std::string& name : order) push.push_back({name, Tensor({2}, {1, 1})});
      for (int i = 0; i < kPushes; ++i) {
        if (!store.Push(push).ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<int64_t> versions;
  auto values = store.Pull({"a", "b", "c"}, &versions);
  ASSERT_TRUE(values.ok());
  // a is in 4 orders, b in 3, c in 3.
  EXPECT_EQ(Values((*values)[0]), (std::vector<float>{-4 * kPushes, -4 * kPushes}));
  EXPECT_EQ(Values((*values)[1]), (std::vector<float>{-3 * kPushes, -3 * kPushes}));
  EXPECT_EQ(Values((*values)[2]), (std::vector<float>{-3 * kPushes, -3 * kPushes}));
  EXPECT_EQ(versions, (std::vector<int64_t>{4 * kPushes, 3 * kPushes, 3 * kPushes}));
}

}  // namespace
}  // namespace pstrain
