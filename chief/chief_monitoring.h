#ifndef PSTRAIN_CHIEF_CHIEF_MONITORING_H_
#define PSTRAIN_CHIEF_CHIEF_MONITORING_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "chief/membership.h"
#include "common/dashboard/dashboard.h"
#include "common/metrics/daemon_metrics.h"
#include "common/model/job_spec.h"
#include "common/tensorboard/tensorboard_observer.h"
#include "common/training/terminal_progress.h"
#include "common/training/training_metrics.h"
#include "common/training/training_observer.h"
#include "proto/chief.pb.h"

namespace pstrain {

// Everything that watches a parameter-server job from the chief: its metrics
// (--metrics_port: training figures, tasks registered and lost, ps recoveries,
// checkpoints), the dashboard on the same port, TensorBoard event files (--logdir), and
// Keras' progress bar when stderr is a terminal. The coordinator reports to observer().
class ChiefMonitoring {
 public:
  // `metrics` (not owned: the daemon runtime's) is where the figures go; `membership`
  // and `describe` (the coordinator's phase, step and placement) are read at each scrape
  // and dashboard request. All three must outlive this object.
  // Errors: the metrics port cannot be bound; --logdir cannot be written (named).
  static absl::StatusOr<std::unique_ptr<ChiefMonitoring>> Start(
      DaemonMetrics* metrics, const JobSpec& job, int num_workers, const Membership* membership,
      std::function<void(ChiefStatusResponse*)> describe);
  ~ChiefMonitoring();

  TrainingObserver* observer() { return &observers_; }

  // The job is over: erases the progress bar and keeps /metrics up for --metrics_linger.
  void Finish();

 private:
  ChiefMonitoring() = default;
  nlohmann::json DashboardStatus() const;

  const Membership* membership_ = nullptr;  // Not owned.
  std::function<void(ChiefStatusResponse*)> describe_;
  DaemonMetrics* metrics_ = nullptr;  // Not owned.
  std::unique_ptr<TrainingMetrics> training_metrics_;
  std::unique_ptr<Dashboard> dashboard_;
  std::unique_ptr<TensorBoardObserver> tensorboard_;
  std::unique_ptr<TerminalProgress> progress_;
  TrainingObservers observers_;
  int tasks_collector_ = -1;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHIEF_MONITORING_H_
