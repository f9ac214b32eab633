#include "ps_server/sync_aggregator.h"

#include <atomic>
#include <functional>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// A one-element variable updated by plain gradient descent (value -= mean), or refusing
// every update when `refuse` is set.
class FakeVariable : public SyncAggregator::Variable {
 public:
  explicit FakeVariable(float value) : value_(value) {}
  absl::Mutex& mu() override { return mu_; }
  int64_t version() override {
    mu_.AssertHeld();
    return version_;
  }
  SyncAggregator::Pending& pending() override {
    mu_.AssertHeld();
    return pending_;
  }
  bool ApplyMean(absl::Span<const float> mean) override {
    mu_.AssertHeld();
    if (refuse_) return false;
    value_ -= mean[0];
    ++updates_;
    return true;
  }
  void BumpVersion() override {
    mu_.AssertHeld();
    ++version_;
  }

  float value() {
    absl::MutexLock lock(&mu_);
    return value_;
  }
  int64_t version_now() {
    absl::MutexLock lock(&mu_);
    return version_;
  }
  int updates() {
    absl::MutexLock lock(&mu_);
    return updates_;
  }
  int pending_count() {
    absl::MutexLock lock(&mu_);
    return pending_.count;
  }
  void set_refuse(bool refuse) {
    absl::MutexLock lock(&mu_);
    refuse_ = refuse;
  }

 private:
  absl::Mutex mu_;
  float value_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int updates_ ABSL_GUARDED_BY(mu_) = 0;
  bool refuse_ ABSL_GUARDED_BY(mu_) = false;
  SyncAggregator::Pending pending_ ABSL_GUARDED_BY(mu_);
};

PushContext From(const std::string& worker) {
  PushContext context;
  context.worker = worker;
  return context;
}

// Pushes gradient `g` for `v` computed at `version`.
void PushOne(SyncAggregator& aggregator, const std::string& worker, FakeVariable& v, float g,
             int64_t version) {
  SyncAggregator::Variable* variables[] = {&v};
  const NamedTensor gradients[] = {{"w", Tensor({1}, {g})}};
  const int64_t versions[] = {version};
  aggregator.Push(From(worker), variables, gradients, versions);
}

bool WaitUntil(const std::function<bool()>& condition) {
  const absl::Time end = absl::Now() + absl::Minutes(1);
  while (!condition()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(SyncAggregatorTest, AppliesTheMeanOnceAllReplicasPushedAndDropsStaleGradients) {
  SyncAggregator aggregator(2, absl::Minutes(1));
  FakeVariable v(10);
  std::atomic<bool> returned{false};
  std::thread first([&] {
    PushOne(aggregator, "a", v, 2, 0);
    returned = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return aggregator.waits() == 1; }));
  EXPECT_FALSE(returned.load());  // its aggregate is not full yet
  EXPECT_EQ(v.updates(), 0);
  PushOne(aggregator, "b", v, 4, 0);
  first.join();
  EXPECT_EQ(v.value(), 7.0f);  // 10 - (2 + 4) / 2
  EXPECT_EQ(v.version_now(), 1);
  EXPECT_EQ(v.updates(), 1);
  EXPECT_EQ(aggregator.full_updates(), 1);
  EXPECT_EQ(aggregator.partial_updates(), 0);
  EXPECT_EQ(aggregator.aggregated_gradients(), 2);
  // Computed at version 0, which is gone: dropped, nothing joins or waits.
  PushOne(aggregator, "a", v, 100, 0);
  EXPECT_EQ(aggregator.stale(), 1);
  EXPECT_EQ(v.pending_count(), 0);
  EXPECT_EQ(v.value(), 7.0f);
  EXPECT_EQ(aggregator.waits(), 1);
  EXPECT_EQ(aggregator.timeouts(), 0);
}

TEST(SyncAggregatorTest, APartialAggregateIsAppliedAtTheTimeout) {
  SyncAggregator aggregator(3, absl::Milliseconds(100));
  FakeVariable v(10);
  const absl::Time start = absl::Now();
  PushOne(aggregator, "a", v, 4, 0);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  EXPECT_EQ(v.value(), 6.0f);
  EXPECT_EQ(v.version_now(), 1);
  EXPECT_EQ(aggregator.timeouts(), 1);
  EXPECT_EQ(aggregator.partial_updates(), 1);
  EXPECT_EQ(aggregator.full_updates(), 0);
  EXPECT_EQ(aggregator.aggregated_gradients(), 1);
}

// A worker that has not pushed for the timeout stops counting towards the aggregate: the
// next push is applied without waiting for it.
TEST(SyncAggregatorTest, AWorkerSilentForTheTimeoutNoLongerCounts) {
  SyncAggregator aggregator(2, absl::Milliseconds(200));
  FakeVariable v(10);
  PushOne(aggregator, "gone", v, 1, 0);  // alone: applied at the timeout
  EXPECT_EQ(aggregator.timeouts(), 1);
  absl::SleepFor(absl::Milliseconds(250));
  const int64_t waits = aggregator.waits();
  PushOne(aggregator, "a", v, 1, 1);
  EXPECT_EQ(aggregator.waits(), waits);  // "gone" is silent: an aggregate of one
  EXPECT_EQ(aggregator.timeouts(), 1);
  EXPECT_EQ(v.version_now(), 2);
  EXPECT_EQ(aggregator.full_updates(), 0);
  EXPECT_EQ(aggregator.partial_updates(), 2);
}

TEST(SyncAggregatorTest, OverflowingSumsAndUpdatesAreDroppedAndCounted) {
  // Long enough that the second push surely comes while the first still waits (it would
  // be stale after the timeout), short enough for the first to end the test at it.
  SyncAggregator aggregator(2, absl::Seconds(3));
  FakeVariable v(0);
  std::thread first([&] { PushOne(aggregator, "a", v, 3e38f, 0); });
  ASSERT_TRUE(WaitUntil([&] { return aggregator.waits() == 1; }));
  // 3e38 + 3e38 is not a float: this gradient stays out, the first waits on alone.
  PushOne(aggregator, "b", v, 3e38f, 0);
  EXPECT_EQ(aggregator.nonfinite_dropped(), 1);
  first.join();  // at the timeout, with the first gradient alone
  EXPECT_EQ(v.value(), -3e38f);
  EXPECT_EQ(aggregator.aggregated_gradients(), 1);
  // An aggregate whose update the variable refuses is dropped; the version still moves
  // on (its gradients were accepted) and the aggregate is emptied.
  SyncAggregator one(1, absl::Minutes(1));
  v.set_refuse(true);
  PushOne(one, "a", v, 1, 1);
  EXPECT_EQ(one.nonfinite_dropped(), 1);
  EXPECT_EQ(v.version_now(), 2);
  EXPECT_EQ(v.pending_count(), 0);
  EXPECT_EQ(v.value(), -3e38f);
}

}  // namespace
}  // namespace pstrain
