#include "ps_server/sync_aggregator.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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
  bool ApplyRowsMean(absl::Span<const int64_t> rows, absl::Span<const float> means) override {
    mu_.AssertHeld();
    if (refuse_) return false;
    if (!rows.empty()) value_ -= means[0];
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

// A table of `rows` x `width` values updated by plain gradient descent, densely
// (ApplyMean) or by rows (ApplyRowsMean), with a count of each kind of update.
class FakeTable : public SyncAggregator::Variable {
 public:
  FakeTable(int64_t rows, int64_t width) : width_(width), values_(rows * width, 1.0f) {}
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
    for (size_t k = 0; k < values_.size(); ++k) values_[k] -= mean[k];
    ++dense_updates_;
    return true;
  }
  bool ApplyRowsMean(absl::Span<const int64_t> rows, absl::Span<const float> means) override {
    mu_.AssertHeld();
    EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
    EXPECT_EQ(means.size(), rows.size() * width_);
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int64_t k = 0; k < width_; ++k) values_[rows[i] * width_ + k] -= means[i * width_ + k];
    }
    ++row_updates_;
    return true;
  }
  void BumpVersion() override {
    mu_.AssertHeld();
    ++version_;
  }
  std::vector<float> values() {
    absl::MutexLock lock(&mu_);
    return values_;
  }
  int dense_updates() {
    absl::MutexLock lock(&mu_);
    return dense_updates_;
  }
  int row_updates() {
    absl::MutexLock lock(&mu_);
    return row_updates_;
  }
  int64_t pending_rows() {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(pending_.rows.size());
  }
  int64_t version_now() {
    absl::MutexLock lock(&mu_);
    return version_;
  }

 private:
  const int64_t width_;
  absl::Mutex mu_;
  std::vector<float> values_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int dense_updates_ ABSL_GUARDED_BY(mu_) = 0;
  int row_updates_ ABSL_GUARDED_BY(mu_) = 0;
  SyncAggregator::Pending pending_ ABSL_GUARDED_BY(mu_);
};

// One pusher's gradient of a table: the rows it touched (ascending, distinct) and their
// values, and the same as a dense gradient (zeros elsewhere).
struct TableGradient {
  std::vector<int64_t> rows;
  std::vector<float> values;
  Tensor Dense(int64_t table_rows, int64_t width) const {
    Tensor dense({table_rows, width});
    for (size_t i = 0; i < rows.size(); ++i) {
      std::copy_n(values.data() + i * width, width, dense.data() + rows[i] * width);
    }
    return dense;
  }
};

// Row values that do not sum exactly in floats, so that a sum in another order would show.
TableGradient MakeRows(std::vector<int64_t> rows, int64_t width, float seed) {
  TableGradient g;
  g.rows = std::move(rows);
  for (size_t i = 0; i < g.rows.size() * width; ++i) {
    g.values.push_back(seed * 0.1f + static_cast<float>(i) / 7.0f);
  }
  return g;
}

void PushTableRows(SyncAggregator& aggregator, const std::string& worker, FakeTable& t,
                   const TableGradient& g, int64_t width, int64_t version) {
  SyncAggregator::Variable* variables[] = {&t};
  SyncAggregator::RowGradient gradients[1];
  gradients[0].name = "table";
  gradients[0].rows = g.rows;
  gradients[0].values = g.values;
  gradients[0].width = width;
  const int64_t versions[] = {version};
  aggregator.PushRows(From(worker), variables, gradients, versions);
}

void PushTableDense(SyncAggregator& aggregator, const std::string& worker, FakeTable& t,
                    const Tensor& g, int64_t version) {
  SyncAggregator::Variable* variables[] = {&t};
  const NamedTensor gradients[] = {{"table", g}};
  const int64_t versions[] = {version};
  aggregator.Push(From(worker), variables, gradients, versions);
}

// Pushes each of `pushes` from a thread of its own ("w0", "w1", ...) and waits for all;
// push i starts only once the i before it joined the aggregate, so the order of arrival
// (which a float sum depends on) is the order given.
void PushInOrder(SyncAggregator& aggregator,
                 const std::vector<std::function<void(const std::string&)>>& pushes) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < pushes.size(); ++i) {
    const int64_t waits_before = aggregator.waits();
    threads.emplace_back([&pushes, i] { pushes[i](absl::StrCat("w", i)); });
    // Every push but the last waits for the aggregate to fill.
    if (i + 1 < pushes.size()) {
      ASSERT_TRUE(WaitUntil([&] { return aggregator.waits() == waits_before + 1; }));
    }
  }
  for (std::thread& t : threads) t.join();
}

// Three workers push rows of one table at one version, overlapping (row 2 by all three,
// row 5 by two), one of them with no rows at all: the aggregate sums each row over the
// pushers that sent it and applies the mean over all three once, by rows, and the table
// ends bit for bit where the dense aggregate of the same gradients (zeros elsewhere)
// leaves it.
TEST(SyncAggregatorRowsTest, RowsOfSeveralPushersAreSummedPerRowAsTheDenseSum) {
  constexpr int64_t kRows = 10, kWidth = 3;
  const std::vector<TableGradient> grads = {MakeRows({0, 2, 5}, kWidth, 1),
                                            MakeRows({2, 5, 9}, kWidth, 2), MakeRows({2}, kWidth, 3),
                                            MakeRows({}, kWidth, 4)};
  // Four pushers, the last with no rows.
  SyncAggregator by_rows(4, absl::Minutes(1));
  SyncAggregator dense(4, absl::Minutes(1));
  FakeTable rows_table(kRows, kWidth), dense_table(kRows, kWidth);
  std::vector<std::function<void(const std::string&)>> row_pushes, dense_pushes;
  for (const TableGradient& g : grads) {
    row_pushes.push_back(
        [&, g](const std::string& w) { PushTableRows(by_rows, w, rows_table, g, kWidth, 0); });
    dense_pushes.push_back([&, g](const std::string& w) {
      PushTableDense(dense, w, dense_table, g.Dense(kRows, kWidth), 0);
    });
  }
  PushInOrder(by_rows, row_pushes);
  PushInOrder(dense, dense_pushes);
  EXPECT_EQ(rows_table.values(), dense_table.values());
  EXPECT_EQ(rows_table.row_updates(), 1);
  EXPECT_EQ(rows_table.dense_updates(), 0);
  EXPECT_EQ(rows_table.version_now(), 1);
  EXPECT_EQ(rows_table.pending_rows(), 0);
  EXPECT_EQ(by_rows.full_updates(), 1);
  EXPECT_EQ(by_rows.aggregated_gradients(), 4);
  // Rows nobody pushed did not move; row 2, pushed by three, did.
  const std::vector<float> after = rows_table.values();
  for (int64_t row : {1, 3, 4, 6, 7, 8}) EXPECT_EQ(after[row * kWidth], 1.0f) << row;
  EXPECT_NE(after[2 * kWidth], 1.0f);
  // The next version aggregates afresh.
  std::vector<std::function<void(const std::string&)>> next;
  for (int i = 0; i < 4; ++i) {
    next.push_back([&](const std::string& w) {
      PushTableRows(by_rows, w, rows_table, MakeRows({7}, kWidth, 1), kWidth, 1);
    });
  }
  PushInOrder(by_rows, next);
  EXPECT_EQ(rows_table.version_now(), 2);
  EXPECT_NEAR(rows_table.values()[7 * kWidth], 1.0f - MakeRows({7}, kWidth, 1).values[0], 1e-6);
}

// A dense gradient and row gradients in one aggregate (a hostile or mixed client): the
// rows fold into the dense sum, which is applied once, densely, as the all-dense one.
TEST(SyncAggregatorRowsTest, ADenseGradientAmongRowsGivesTheDenseSum) {
  constexpr int64_t kRows = 6, kWidth = 2;
  const TableGradient a = MakeRows({1, 4}, kWidth, 1), b = MakeRows({0, 1}, kWidth, 2),
                      c = MakeRows({4, 5}, kWidth, 3);
  SyncAggregator mixed(3, absl::Minutes(1)), dense(3, absl::Minutes(1));
  FakeTable mixed_table(kRows, kWidth), dense_table(kRows, kWidth);
  PushInOrder(mixed, {[&](const std::string& w) { PushTableRows(mixed, w, mixed_table, a, kWidth, 0); },
                      [&](const std::string& w) {
                        PushTableDense(mixed, w, mixed_table, b.Dense(kRows, kWidth), 0);
                      },
                      [&](const std::string& w) { PushTableRows(mixed, w, mixed_table, c, kWidth, 0); }});
  PushInOrder(dense, {[&](const std::string& w) {
                        PushTableDense(dense, w, dense_table, a.Dense(kRows, kWidth), 0);
                      },
                      [&](const std::string& w) {
                        PushTableDense(dense, w, dense_table, b.Dense(kRows, kWidth), 0);
                      },
                      [&](const std::string& w) {
                        PushTableDense(dense, w, dense_table, c.Dense(kRows, kWidth), 0);
                      }});
  EXPECT_EQ(mixed_table.values(), dense_table.values());
  EXPECT_EQ(mixed_table.dense_updates(), 1);
  EXPECT_EQ(mixed_table.row_updates(), 0);
}

// Row sums that overflow a float keep that gradient out of the aggregate, whole (its
// other rows too), and change nothing already summed; a stale row gradient is dropped.
TEST(SyncAggregatorRowsTest, OverflowingRowSumsAndStaleRowsStayOut) {
  constexpr int64_t kWidth = 1;
  SyncAggregator aggregator(2, absl::Seconds(3));
  FakeTable table(4, kWidth);
  TableGradient big;
  big.rows = {1};
  big.values = {3e38f};
  std::thread first([&] { PushTableRows(aggregator, "a", table, big, kWidth, 0); });
  ASSERT_TRUE(WaitUntil([&] { return aggregator.waits() == 1; }));
  TableGradient also_big;
  also_big.rows = {0, 1};
  also_big.values = {5, 3e38f};
  PushTableRows(aggregator, "b", table, also_big, kWidth, 0);
  EXPECT_EQ(aggregator.nonfinite_dropped(), 1);
  EXPECT_EQ(table.pending_rows(), 1);  // row 0 of the refused gradient never joined
  first.join();  // at the timeout, alone
  EXPECT_EQ(table.values(), (std::vector<float>{1, 1 - 3e38f, 1, 1}));
  EXPECT_EQ(aggregator.partial_updates(), 1);
  PushTableRows(aggregator, "a", table, MakeRows({2}, kWidth, 1), kWidth, 0);
  EXPECT_EQ(aggregator.stale(), 1);
  EXPECT_EQ(table.pending_rows(), 0);
}

}  // namespace
}  // namespace pstrain
