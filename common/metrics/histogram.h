#ifndef PSTRAIN_COMMON_METRICS_HISTOGRAM_H_
#define PSTRAIN_COMMON_METRICS_HISTOGRAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "prometheus/client_metric.h"

namespace pstrain {

// A Prometheus histogram whose Observe takes no lock: one atomic add on a bucket, one on
// the count and a compare-and-swap on the sum. prometheus::Histogram takes a mutex per
// observation (so that a scrape sees count and buckets agree); on the ps' push path that
// would serialise every push. A scrape here may see an observation in its bucket but not
// yet in the sum, which a rate over minutes never notices.
//
// Thread-safe: Observe and Collect from any thread.
class AtomicHistogram {
 public:
  // `upper_bounds` must be increasing; a +Inf bucket is implied.
  explicit AtomicHistogram(std::vector<double> upper_bounds);

  void Observe(double value);

  // Cumulative buckets, count and sum in prometheus-cpp's form.
  prometheus::ClientMetric::Histogram Collect() const;

  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> upper_bounds_;
  // One counter per bound, plus the +Inf bucket; not cumulative (Collect adds them up).
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Bucket bounds for latencies in seconds, from 100 us to 10 s in steps of about x2.5.
std::vector<double> LatencyBucketsSeconds();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_METRICS_HISTOGRAM_H_
