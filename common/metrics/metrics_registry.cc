#include "common/metrics/metrics_registry.h"

#include <utility>

#include "prometheus/text_serializer.h"

namespace pstrain {

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}

prometheus::Counter& MetricsRegistry::AddCounter(const std::string& name,
                                                 const std::string& help,
                                                 const MetricLabels& labels) {
  // The registry merges a family added twice under one name (Registry::InsertBehavior).
  return prometheus::BuildCounter().Name(name).Help(help).Register(*registry_).Add(labels);
}

prometheus::Gauge& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                             const MetricLabels& labels) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(*registry_).Add(labels);
}

AtomicHistogram& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                               const std::vector<double>& upper_bounds,
                                               const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  for (HistogramEntry& e : histograms_) {
    if (e.name == name && e.labels == labels) return *e.histogram;
  }
  histograms_.push_back(
      {name, help, labels, std::make_unique<AtomicHistogram>(upper_bounds)});
  return *histograms_.back().histogram;
}

int MetricsRegistry::AddCollector(Collector collector) {
  absl::MutexLock lock(&mu_);
  const int id = next_collector_id_++;
  collectors_[id] = std::move(collector);
  return id;
}

void MetricsRegistry::RemoveCollector(int id) {
  absl::MutexLock lock(&mu_);
  collectors_.erase(id);
}

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  absl::MutexLock lock(&mu_);
  // Histograms of one name (different labels) form one family.
  for (size_t i = 0; i < histograms_.size(); ++i) {
    prometheus::MetricFamily* family = nullptr;
    for (prometheus::MetricFamily& f : families) {
      if (f.name == histograms_[i].name) family = &f;
    }
    if (family == nullptr) {
      families.push_back({histograms_[i].name, histograms_[i].help,
                          prometheus::MetricType::Histogram, {}});
      family = &families.back();
    }
    prometheus::ClientMetric metric;
    for (const auto& [key, value] : histograms_[i].labels) metric.label.push_back({key, value});
    metric.histogram = histograms_[i].histogram->Collect();
    family->metric.push_back(std::move(metric));
  }
  for (const auto& [id, collector] : collectors_) collector(&families);
  return families;
}

std::string MetricsRegistry::TextFormat() const {
  return prometheus::TextSerializer().Serialize(Collect());
}

MetricFamilyBuilder::MetricFamilyBuilder(std::string name, std::string help,
                                         prometheus::MetricType type) {
  family_.name = std::move(name);
  family_.help = std::move(help);
  family_.type = type;
}

MetricFamilyBuilder& MetricFamilyBuilder::Add(double value, const MetricLabels& labels) {
  prometheus::ClientMetric metric;
  for (const auto& [key, label_value] : labels) metric.label.push_back({key, label_value});
  switch (family_.type) {
    case prometheus::MetricType::Counter:
      metric.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      metric.gauge.value = value;
      break;
    default:
      metric.untyped.value = value;
      break;
  }
  family_.metric.push_back(std::move(metric));
  return *this;
}

void MetricFamilyBuilder::AppendTo(std::vector<prometheus::MetricFamily>* families) {
  families->push_back(std::move(family_));
}

}  // namespace pstrain
