#ifndef PSTRAIN_WORKER_WORKER_METRICS_H_
#define PSTRAIN_WORKER_WORKER_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/metrics/metrics_registry.h"
#include "ps_server/client/ps_trainer_metrics.h"

namespace pstrain {

// A worker task's Prometheus metrics (pstrain_worker_*):
//   steps_total, samples_total             training steps run and their examples
//   step_duration_seconds{phase}           histogram per phase of a step: "compute"
//                                          (forward and backward), "push_pull" (the
//                                          gradients pushed and the new values pulled,
//                                          one round trip per ps), "pull" (a full pull:
//                                          the first step, or after a ps changed)
//   retries_total                          steps whose exchange failed and that pull
//                                          every value afresh before the next step
//   backend_info{backend}                  1, naming where it computes ("cpu", "cuda:0")
// The step, pull and retry series are what the worker's PsTrainer records
// (ps_server/client/ps_trainer_metrics.h). Every update is an atomic add (no lock).
// Thread-safe.
class WorkerMetrics final : public PsTrainerMetrics {
 public:
  WorkerMetrics(MetricsRegistry* registry, const std::string& backend);

  void RecordStep(int64_t samples, absl::Duration compute,
                  absl::Duration push_pull) override {
    steps_.Increment();
    samples_.Increment(static_cast<double>(samples));
    compute_.Observe(absl::ToDoubleSeconds(compute));
    push_pull_.Observe(absl::ToDoubleSeconds(push_pull));
  }
  void RecordPull(absl::Duration pull) override {
    pull_.Observe(absl::ToDoubleSeconds(pull));
  }
  void RecordRetry() override { retries_.Increment(); }

 private:
  prometheus::Counter& steps_;
  prometheus::Counter& samples_;
  prometheus::Counter& retries_;
  AtomicHistogram& compute_;
  AtomicHistogram& push_pull_;
  AtomicHistogram& pull_;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_WORKER_METRICS_H_
