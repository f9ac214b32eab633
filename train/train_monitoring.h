#ifndef PSTRAIN_TRAIN_TRAIN_MONITORING_H_
#define PSTRAIN_TRAIN_TRAIN_MONITORING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/dashboard/dashboard.h"
#include "common/metrics/daemon_metrics.h"
#include "common/model/job_spec.h"
#include "common/tensorboard/tensorboard_observer.h"
#include "common/training/terminal_progress.h"
#include "common/training/training_metrics.h"
#include "common/training/training_observer.h"
#include "pstrain/fit.h"

namespace pstrain {

// What watches train (the default, mirrored and multi-worker mirrored strategies): its
// metrics (--metrics_port), the dashboard on that port, TensorBoard event files
// (--logdir) and Keras' progress bar when stderr is a terminal, fed from Fit's
// callbacks. In a multi-worker job every worker serves its own metrics; only the one that
// prints (`reports`, rank 0) writes event files and draws the bar.
class TrainMonitoring {
 public:
  // `metrics` (not owned; the daemon runtime's) must outlive this object. `title` names
  // the run on the dashboard ("pstrain train: mirrored, 2 replicas").
  // Errors: the metrics port cannot be bound; --logdir cannot be written (named).
  static absl::StatusOr<std::unique_ptr<TrainMonitoring>> Start(DaemonMetrics* metrics,
                                                                const JobSpec& job,
                                                                const std::string& title,
                                                                int num_replicas, bool reports);
  ~TrainMonitoring();

  // Fit's on_batch, and what on_epoch and on_checkpoint should also tell.
  void OnBatch(const BatchProgress& progress);
  TrainingObserver* observer() { return &observers_; }

  // Training is over: erases the progress bar and keeps /metrics up for --metrics_linger.
  void Finish();

 private:
  TrainMonitoring() = default;

  DaemonMetrics* metrics_ = nullptr;  // Not owned.
  std::unique_ptr<TrainingMetrics> training_metrics_;
  std::unique_ptr<Dashboard> dashboard_;
  std::unique_ptr<TensorBoardObserver> tensorboard_;
  std::unique_ptr<TerminalProgress> progress_;
  TrainingObservers observers_;
  std::string strategy_;
};

}  // namespace pstrain

#endif  // PSTRAIN_TRAIN_TRAIN_MONITORING_H_
