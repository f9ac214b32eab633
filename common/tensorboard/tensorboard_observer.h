#ifndef PSTRAIN_COMMON_TENSORBOARD_TENSORBOARD_OBSERVER_H_
#define PSTRAIN_COMMON_TENSORBOARD_TENSORBOARD_OBSERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/tensorboard/training_event_log.h"
#include "common/training/training_observer.h"

namespace pstrain {

// Writes a run's events to TensorBoard files (TrainingEventLog): every epoch's figures,
// and every `log_every_steps` global steps (0: never) the loss of the latest steps, the
// samples per second since the last such record, and the learning rate. A failed write
// is logged once and training goes on. Thread-safe.
class TensorBoardObserver : public TrainingObserver {
 public:
  TensorBoardObserver(std::unique_ptr<TrainingEventLog> log, int64_t log_every_steps,
                      double learning_rate);

  void OnSteps(const StepsDone& steps) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnEpoch(const EpochSummary& summary) override;

 private:
  void Check(const absl::Status& written);

  const std::unique_ptr<TrainingEventLog> log_;
  const int64_t log_every_steps_;
  const double learning_rate_;
  std::atomic<bool> logged_failure_{false};

  absl::Mutex mu_;
  int64_t next_log_step_ ABSL_GUARDED_BY(mu_);
  absl::Time since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t samples_since_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TENSORBOARD_TENSORBOARD_OBSERVER_H_
