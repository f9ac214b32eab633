#include "common/metrics/metrics_registry.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

TEST(AtomicHistogramTest, BucketsAreCumulativeAndBoundsInclusive) {
  AtomicHistogram histogram({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 2.0, 4.0, 9.0}) histogram.Observe(v);
  const prometheus::ClientMetric::Histogram h = histogram.Collect();
  ASSERT_EQ(h.bucket.size(), 4u);
  EXPECT_EQ(h.bucket[0].cumulative_count, 2u);  // 0.5, 1.0 (<= 1)
  EXPECT_EQ(h.bucket[1].cumulative_count, 4u);  // 1.5, 2.0
  EXPECT_EQ(h.bucket[2].cumulative_count, 5u);  // 4.0
  EXPECT_EQ(h.bucket[3].cumulative_count, 6u);  // +Inf
  EXPECT_TRUE(std::isinf(h.bucket[3].upper_bound));
  EXPECT_EQ(h.sample_count, 6u);
  EXPECT_DOUBLE_EQ(h.sample_sum, 18.0);
}

TEST(AtomicHistogramTest, ConcurrentObservationsAreAllCounted) {
  AtomicHistogram histogram(LatencyBucketsSeconds());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&histogram] {
      for (int i = 0; i < 10000; ++i) histogram.Observe(0.25);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(histogram.count(), 40000u);
  EXPECT_DOUBLE_EQ(histogram.sum(), 10000.0);
}

TEST(MetricsRegistryTest, TextFormatHoldsEveryKindOfSource) {
  MetricsRegistry registry;
  prometheus::Counter& pushes = registry.AddCounter("pstrain_ps_pushes_total", "Pushes");
  pushes.Increment(3);
  // The same name and labels again is the same counter.
  registry.AddCounter("pstrain_ps_pushes_total", "Pushes").Increment();
  registry.AddGauge("pstrain_chief_epoch", "Epoch").Set(7);
  registry.AddHistogram("pstrain_ps_push_duration_seconds", "Push latency", {0.1, 1}).Observe(0.5);
  registry.AddCollector([](std::vector<prometheus::MetricFamily>* families) {
    MetricFamilyBuilder("pstrain_ps_variable_version", "Updates applied",
                        prometheus::MetricType::Gauge)
        .Add(12, {{"variable", "dense/kernel"}})
        .Add(4, {{"variable", "dense/bias"}})
        .AppendTo(families);
  });
  const std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("# TYPE pstrain_ps_pushes_total counter\npstrain_ps_pushes_total 4"));
  EXPECT_THAT(text, HasSubstr("pstrain_chief_epoch 7"));
  EXPECT_THAT(text, HasSubstr("# TYPE pstrain_ps_push_duration_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_push_duration_seconds_bucket{le=\"0.1\"} 0"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_push_duration_seconds_bucket{le=\"1\"} 1"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_push_duration_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_variable_version{variable=\"dense/kernel\"} 12"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_variable_version{variable=\"dense/bias\"} 4"));
}

TEST(MetricsRegistryTest, RemovedCollectorIsNoLongerCalled) {
  MetricsRegistry registry;
  int calls = 0;
  const int id = registry.AddCollector([&calls](std::vector<prometheus::MetricFamily>*) { ++calls; });
  (void)registry.Collect();
  registry.RemoveCollector(id);
  (void)registry.Collect();
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace pstrain
