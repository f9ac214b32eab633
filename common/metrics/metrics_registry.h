#ifndef PSTRAIN_COMMON_METRICS_METRICS_REGISTRY_H_
#define PSTRAIN_COMMON_METRICS_METRICS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/histogram.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace pstrain {

using MetricLabels = std::map<std::string, std::string>;

// One process's metrics, in Prometheus' model, served by MetricsServer at /metrics.
// Three kinds of source:
//  - counters and gauges (prometheus-cpp's) that code updates as things happen: an
//    Increment or Set is one atomic operation, no lock;
//  - histograms (AtomicHistogram, also lock-free);
//  - collectors: callbacks run at scrape time that read state a core already keeps
//    (a store's variables and versions, the chief's epoch), so that state costs nothing
//    between scrapes.
// Names follow Prometheus' conventions: a pstrain_ prefix, base units in the name
// (_seconds, _bytes), _total on counters. The Add* calls are for start-up: a metric
// object they return lives as long as the registry. Adding a name twice with the same
// labels returns the same metric.
//
// Thread-safe.
class MetricsRegistry : public prometheus::Collectable {
 public:
  MetricsRegistry();

  prometheus::Counter& AddCounter(const std::string& name, const std::string& help,
                                  const MetricLabels& labels = {}) ABSL_LOCKS_EXCLUDED(mu_);
  prometheus::Gauge& AddGauge(const std::string& name, const std::string& help,
                              const MetricLabels& labels = {}) ABSL_LOCKS_EXCLUDED(mu_);
  AtomicHistogram& AddHistogram(const std::string& name, const std::string& help,
                                const std::vector<double>& upper_bounds,
                                const MetricLabels& labels = {}) ABSL_LOCKS_EXCLUDED(mu_);

  // A collector appends whole families (MetricFamilyBuilder helps). Called at every
  // scrape, from the HTTP server's thread: it must be thread-safe, quick, and must not
  // outlive what it reads (RemoveCollectors, or destroy the server first).
  using Collector = std::function<void(std::vector<prometheus::MetricFamily>*)>;
  // Returns an id for RemoveCollector.
  int AddCollector(Collector collector) ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveCollector(int id) ABSL_LOCKS_EXCLUDED(mu_);

  // Every metric, for the exposer.
  std::vector<prometheus::MetricFamily> Collect() const override ABSL_LOCKS_EXCLUDED(mu_);

  // Collect() in Prometheus' text format (what /metrics serves).
  std::string TextFormat() const;

 private:
  struct HistogramEntry {
    std::string name;
    std::string help;
    MetricLabels labels;
    std::unique_ptr<AtomicHistogram> histogram;
  };

  std::shared_ptr<prometheus::Registry> registry_;  // thread-safe itself
  mutable absl::Mutex mu_;
  std::vector<HistogramEntry> histograms_ ABSL_GUARDED_BY(mu_);
  std::map<int, Collector> collectors_ ABSL_GUARDED_BY(mu_);
  int next_collector_id_ ABSL_GUARDED_BY(mu_) = 0;
};

// Builds a family for a collector: a gauge, a counter or an info-style metric.
//   MetricFamilyBuilder("pstrain_ps_variables", "Variables held", prometheus::MetricType::Gauge)
//       .Add(3).AppendTo(families);
class MetricFamilyBuilder {
 public:
  MetricFamilyBuilder(std::string name, std::string help, prometheus::MetricType type);
  // One sample with `labels`; the value goes to the counter, gauge or untyped field as
  // the family's type says.
  MetricFamilyBuilder& Add(double value, const MetricLabels& labels = {});
  void AppendTo(std::vector<prometheus::MetricFamily>* families);

 private:
  prometheus::MetricFamily family_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_METRICS_METRICS_REGISTRY_H_
