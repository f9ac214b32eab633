#include "worker/worker_metrics.h"

namespace pstrain {
namespace {

constexpr char kStepDuration[] = "pstrain_worker_step_duration_seconds";
constexpr char kStepDurationHelp[] = "Time of each phase of a training step";

}  // namespace

WorkerMetrics::WorkerMetrics(MetricsRegistry* registry, const std::string& backend)
    : steps_(registry->AddCounter("pstrain_worker_steps_total", "Training steps run")),
      samples_(registry->AddCounter("pstrain_worker_samples_total",
                                    "Training examples the steps ran on")),
      retries_(registry->AddCounter("pstrain_worker_retries_total",
                                    "Steps whose push failed; every value is pulled again")),
      compute_(registry->AddHistogram(kStepDuration, kStepDurationHelp, LatencyBucketsSeconds(),
                                      {{"phase", "compute"}})),
      push_pull_(registry->AddHistogram(kStepDuration, kStepDurationHelp,
                                        LatencyBucketsSeconds(), {{"phase", "push_pull"}})),
      pull_(registry->AddHistogram(kStepDuration, kStepDurationHelp, LatencyBucketsSeconds(),
                                   {{"phase", "pull"}})) {
  registry->AddGauge("pstrain_worker_backend_info", "Always 1: where this worker computes",
                     {{"backend", backend}})
      .Set(1);
}

}  // namespace pstrain
