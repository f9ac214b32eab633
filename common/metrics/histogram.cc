#include "common/metrics/histogram.h"

#include <algorithm>
#include <limits>

namespace pstrain {

AtomicHistogram::AtomicHistogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      buckets_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) buckets_[i].store(0);
}

void AtomicHistogram::Observe(double value) {
  // Prometheus' buckets are "less than or equal": the first bound >= value.
  const size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  double sum = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(sum, sum + value, std::memory_order_relaxed)) {
  }
}

prometheus::ClientMetric::Histogram AtomicHistogram::Collect() const {
  prometheus::ClientMetric::Histogram histogram;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    prometheus::ClientMetric::Bucket bucket;
    bucket.cumulative_count = cumulative;
    bucket.upper_bound = i < upper_bounds_.size() ? upper_bounds_[i]
                                                  : std::numeric_limits<double>::infinity();
    histogram.bucket.push_back(bucket);
  }
  // The count is the +Inf bucket's, so the two always agree in one scrape.
  histogram.sample_count = cumulative;
  histogram.sample_sum = sum_.load(std::memory_order_relaxed);
  return histogram;
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,    5,     10};
}

}  // namespace pstrain
