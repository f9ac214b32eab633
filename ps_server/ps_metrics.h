#ifndef PSTRAIN_PS_SERVER_PS_METRICS_H_
#define PSTRAIN_PS_SERVER_PS_METRICS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_registry.h"
#include "ps_server/variable_store.h"

namespace pstrain {

// A ps task's Prometheus metrics (pstrain_ps_*):
//   pushes_total, pulls_total, stale_gradients_total, consistency_waits_total,
//   consistency_timeouts_total, nonfinite_refused_total, nonfinite_skipped_total,
//   duplicate_pushes_total, push_lag_pushes_total, push_lag_sum_total, push_lag_max,
//   variables, variable_bytes, variable_version{variable}
//     read from the VariableStore at scrape time (its own atomics: nothing more on the
//     push path);
//   received_bytes_total, sent_bytes_total (tensor payload of pushes and pulls),
//   push_duration_seconds (histogram: from a push's arrival in the store to its end,
//     consistency waits included), refused_calls_total{method, reason} (calls answered
//     with an error: the reason is the status code, e.g. invalid_argument)
//     updated by the RPC adapter with atomic adds only.
//
// Thread-safe. The store must outlive this object; the collector is removed on
// destruction.
class PsMetrics {
 public:
  PsMetrics(MetricsRegistry* registry, const VariableStore* store);
  ~PsMetrics();
  PsMetrics(const PsMetrics&) = delete;
  PsMetrics& operator=(const PsMetrics&) = delete;

  void RecordPush(int64_t gradient_bytes, absl::Duration latency) {
    received_bytes_.Increment(static_cast<double>(gradient_bytes));
    push_seconds_.Observe(absl::ToDoubleSeconds(latency));
  }
  void RecordPull(int64_t value_bytes) { sent_bytes_.Increment(static_cast<double>(value_bytes)); }
  // Sets the bytes RecordPush and RecordPull counted so far in `status` (GetStatus's
  // answer, and the final status a ps logs).
  void DescribeTraffic(PsStatusResponse* status) const {
    status->set_received_bytes(static_cast<int64_t>(received_bytes_.Value()));
    status->set_sent_bytes(static_cast<int64_t>(sent_bytes_.Value()));
  }
  // Counts `status` when it is an error; `method` is the RPC's name ("Push").
  void RecordResult(const char* method, const absl::Status& status);

 private:
  MetricsRegistry* const registry_;  // Not owned.
  prometheus::Counter& received_bytes_;
  prometheus::Counter& sent_bytes_;
  AtomicHistogram& push_seconds_;
  int collector_ = -1;
};

// Logs what GetStatus would answer now, as one line of protobuf's JSON ("ps task N final
// status: {...}"): once the task is gone its counters and versions stay readable in the
// log (an operator's post-mortem, and the cluster tests' check of the consistency rules
// and the traffic against the ps's own counts). The ps daemon and a custom loop's ps
// log it as they exit (PsInstance::LogFinalStatus, ps_instance.h).
void LogFinalPsStatus(int task_index, const VariableStore& store, const PsMetrics& metrics);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_PS_METRICS_H_
