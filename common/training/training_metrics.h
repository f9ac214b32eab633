#ifndef PSTRAIN_COMMON_TRAINING_TRAINING_METRICS_H_
#define PSTRAIN_COMMON_TRAINING_TRAINING_METRICS_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_registry.h"
#include "common/training/training_observer.h"

namespace pstrain {

// A training run's figures as Prometheus metrics, from the events every trainer reports
// (the chief, train):
//   pstrain_training_epoch, pstrain_training_global_step            where the run is
//   pstrain_training_loss, pstrain_training_accuracy,
//   pstrain_training_validation_loss, pstrain_training_validation_accuracy
//                                        the last finished epoch's, as its line printed them
//                                        (the validation ones once a validation ran)
//   pstrain_training_samples_total, pstrain_training_samples_per_second
//                                        (over the last second or more of reports)
//   pstrain_training_checkpoints_written_total, pstrain_training_checkpoint_failures_total,
//   pstrain_training_checkpoint_write_duration_seconds (histogram)
//   pstrain_chief_tasks_lost_total{task_type}, pstrain_chief_ps_recoveries_total
// Thread-safe.
class TrainingMetrics : public TrainingObserver {
 public:
  explicit TrainingMetrics(MetricsRegistry* registry);

  void OnSteps(const StepsDone& steps) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnEpoch(const EpochSummary& summary) override;
  void OnCheckpoint(const CheckpointEvent& checkpoint) override;
  void OnTaskLost(const std::string& task_type, const std::string& task) override;
  void OnPsRecovered() override;

 private:
  MetricsRegistry* const registry_;  // Not owned.
  prometheus::Gauge& epoch_;
  prometheus::Gauge& global_step_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& accuracy_;
  prometheus::Counter& samples_;
  prometheus::Gauge& samples_per_second_;
  prometheus::Counter& checkpoints_written_;
  prometheus::Counter& checkpoint_failures_;
  AtomicHistogram& checkpoint_seconds_;
  prometheus::Counter& ps_recoveries_;

  // The window samples per second are measured over.
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t window_samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_global_step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_TRAINING_METRICS_H_
