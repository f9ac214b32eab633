#include "ps_server/ps_metrics.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "google/protobuf/util/json_util.h"

namespace pstrain {

PsMetrics::PsMetrics(MetricsRegistry* registry, const VariableStore* store)
    : registry_(registry),
      received_bytes_(registry->AddCounter("pstrain_ps_received_bytes_total",
                                           "Gradient bytes received in pushes")),
      sent_bytes_(registry->AddCounter("pstrain_ps_sent_bytes_total",
                                       "Variable bytes sent in pulls and push-pulls")),
      push_seconds_(registry->AddHistogram(
          "pstrain_ps_push_duration_seconds",
          "Time a push spends in the store, consistency waits included",
          LatencyBucketsSeconds())) {
  collector_ = registry->AddCollector([store](std::vector<prometheus::MetricFamily>* families) {
    using prometheus::MetricType;
    MetricFamilyBuilder("pstrain_ps_pushes_total", "Pushes applied (or aggregated)",
                        MetricType::Counter)
        .Add(static_cast<double>(store->num_pushes()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_pulls_total", "Pulls served", MetricType::Counter)
        .Add(static_cast<double>(store->num_pulls()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_stale_gradients_total",
                        "Sync mode: gradients dropped as computed at an older version",
                        MetricType::Counter)
        .Add(static_cast<double>(store->stale_gradients()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_consistency_waits_total",
                        "Pushes held by bounded staleness or a sync aggregate",
                        MetricType::Counter)
        .Add(static_cast<double>(store->consistency_waits()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_consistency_timeouts_total",
                        "Consistency waits that ended at the timeout", MetricType::Counter)
        .Add(static_cast<double>(store->consistency_timeouts()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_nonfinite_refused_total",
                        "Pushes, creations and restores refused for a NaN or an infinity",
                        MetricType::Counter)
        .Add(static_cast<double>(store->nonfinite_refused()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_nonfinite_skipped_total",
                        "Pushes dropped for a NaN or an infinity (nonfinite: skip)",
                        MetricType::Counter)
        .Add(static_cast<double>(store->nonfinite_skipped()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_duplicate_pushes_total",
                        "Retried pushes (a request id already applied) not applied again",
                        MetricType::Counter)
        .Add(static_cast<double>(store->duplicate_pushes()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_push_lag_pushes_total",
                        "Pushes that carried the versions they were computed at",
                        MetricType::Counter)
        .Add(static_cast<double>(store->push_lag_pushes()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_push_lag_sum_total",
                        "Sum of those pushes' lags (version applied at minus computed at)",
                        MetricType::Counter)
        .Add(static_cast<double>(store->push_lag_sum()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_push_lag_max",
                        "Largest lag of a push that carried its versions", MetricType::Gauge)
        .Add(static_cast<double>(store->push_lag_max()))
        .AppendTo(families);
    const std::vector<VariableStore::VariableInfo> variables = store->List();
    MetricFamilyBuilder versions("pstrain_ps_variable_version",
                                 "Updates applied to each variable held", MetricType::Gauge);
    double bytes = 0;
    for (const VariableStore::VariableInfo& v : variables) {
      double elements = 1;
      for (int64_t d : v.shape) elements *= static_cast<double>(d);
      bytes += elements * sizeof(float);
      versions.Add(static_cast<double>(v.version), {{"variable", v.name}});
    }
    MetricFamilyBuilder("pstrain_ps_variables", "Variables (shards) held", MetricType::Gauge)
        .Add(static_cast<double>(variables.size()))
        .AppendTo(families);
    MetricFamilyBuilder("pstrain_ps_variable_bytes",
                        "Bytes of the variables' values held (optimizer slots apart)",
                        MetricType::Gauge)
        .Add(bytes)
        .AppendTo(families);
    versions.AppendTo(families);
  });
}

PsMetrics::~PsMetrics() { registry_->RemoveCollector(collector_); }

void PsMetrics::RecordResult(const char* method, const absl::Status& status) {
  if (status.ok()) return;
  // Few distinct (method, code) pairs: the family hands back the same counter each time.
  registry_
      ->AddCounter("pstrain_ps_refused_calls_total", "Calls answered with an error, by reason",
                   {{"method", method},
                    {"reason", absl::AsciiStrToLower(absl::StatusCodeToString(status.code()))}})
      .Increment();
}

void LogFinalPsStatus(int task_index, const VariableStore& store, const PsMetrics& metrics) {
  PsStatusResponse status = DescribeStore(store);
  metrics.DescribeTraffic(&status);
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(status, &json, print).ok()) return;
  LogInfo(absl::StrCat("ps task ", task_index, " final status: ", json));
}

}  // namespace pstrain
