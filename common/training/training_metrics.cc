#include "common/training/training_metrics.h"

#include <algorithm>

namespace pstrain {

TrainingMetrics::TrainingMetrics(MetricsRegistry* registry)
    : registry_(registry),
      epoch_(registry->AddGauge("pstrain_training_epoch", "The epoch in progress (1-based)")),
      global_step_(registry->AddGauge("pstrain_training_global_step",
                                      "Optimizer steps taken by the whole run")),
      loss_(registry->AddGauge("pstrain_training_loss", "Training loss of the last epoch")),
      accuracy_(registry->AddGauge("pstrain_training_accuracy",
                                   "Training accuracy of the last epoch")),
      samples_(registry->AddCounter("pstrain_training_samples_total",
                                    "Training examples stepped through")),
      samples_per_second_(registry->AddGauge("pstrain_training_samples_per_second",
                                             "Training examples per second, recently")),
      checkpoints_written_(registry->AddCounter("pstrain_training_checkpoints_written_total",
                                                "Checkpoints written")),
      checkpoint_failures_(registry->AddCounter("pstrain_training_checkpoint_failures_total",
                                                "Checkpoint writes that failed")),
      checkpoint_seconds_(registry->AddHistogram(
          "pstrain_training_checkpoint_write_duration_seconds",
          "Time to write one checkpoint (reading the ps included)",
          {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})),
      ps_recoveries_(registry->AddCounter("pstrain_chief_ps_recoveries_total",
                                          "Times training paused for a failed ps and resumed")) {}

void TrainingMetrics::OnSteps(const StepsDone& steps) {
  samples_.Increment(static_cast<double>(steps.samples));
  epoch_.Set(steps.epoch);
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  // Several workers' reports arrive out of order: the step only moves forward.
  max_global_step_ = std::max(max_global_step_, steps.global_step);
  global_step_.Set(static_cast<double>(max_global_step_));
  if (window_start_ == absl::InfinitePast()) {
    // The first report starts the clock; its own samples took an unknown time.
    window_start_ = now;
    return;
  }
  window_samples_ += steps.samples;
  const absl::Duration window = now - window_start_;
  if (window >= absl::Seconds(1)) {
    samples_per_second_.Set(static_cast<double>(window_samples_) / absl::ToDoubleSeconds(window));
    window_start_ = now;
    window_samples_ = 0;
  }
}

void TrainingMetrics::OnEpoch(const EpochSummary& summary) {
  epoch_.Set(summary.epoch);
  loss_.Set(summary.loss);
  accuracy_.Set(summary.accuracy);
  if (summary.has_validation) {
    // Added with the first validation: a job without one exports no zeros.
    registry_->AddGauge("pstrain_training_validation_loss", "Validation loss after the last epoch")
        .Set(summary.val_loss);
    registry_
        ->AddGauge("pstrain_training_validation_accuracy",
                   "Validation accuracy after the last epoch")
        .Set(summary.val_accuracy);
  }
}

void TrainingMetrics::OnCheckpoint(const CheckpointEvent& checkpoint) {
  (checkpoint.ok ? checkpoints_written_ : checkpoint_failures_).Increment();
  if (checkpoint.ok) checkpoint_seconds_.Observe(absl::ToDoubleSeconds(checkpoint.took));
}

void TrainingMetrics::OnTaskLost(const std::string& task_type, const std::string&) {
  registry_
      ->AddCounter("pstrain_chief_tasks_lost_total",
                   "Tasks that stopped answering and whose work went to others",
                   {{"task_type", task_type}})
      .Increment();
}

void TrainingMetrics::OnPsRecovered() { ps_recoveries_.Increment(); }

}  // namespace pstrain
