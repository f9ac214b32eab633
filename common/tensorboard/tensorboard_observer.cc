#include "common/tensorboard/tensorboard_observer.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace pstrain {

TensorBoardObserver::TensorBoardObserver(std::unique_ptr<TrainingEventLog> log,
                                         int64_t log_every_steps, double learning_rate)
    : log_(std::move(log)),
      log_every_steps_(log_every_steps),
      learning_rate_(learning_rate),
      next_log_step_(log_every_steps) {}

void TensorBoardObserver::Check(const absl::Status& written) {
  if (!written.ok() && !logged_failure_.exchange(true)) {
    LogWarning(absl::StrCat("TensorBoard events: ", written.message(),
                            "; training goes on (logged once)"));
  }
}

void TensorBoardObserver::OnSteps(const StepsDone& steps) {
  if (log_every_steps_ <= 0) return;
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (since_ == absl::InfinitePast()) {
    // The first report starts the clock (its own steps took an unknown time).
    since_ = now;
  } else {
    samples_since_ += steps.samples;
  }
  if (steps.global_step < next_log_step_) return;
  const double seconds = absl::ToDoubleSeconds(now - since_);
  const double samples_per_second = seconds > 0 ? samples_since_ / seconds : 0;
  Check(log_->WriteSteps(steps.global_step, steps.loss, samples_per_second, learning_rate_));
  // The next multiple of log_every_steps after this step (a chunk may cross several).
  next_log_step_ = (steps.global_step / log_every_steps_ + 1) * log_every_steps_;
  since_ = now;
  samples_since_ = 0;
}

void TensorBoardObserver::OnEpoch(const EpochSummary& summary) {
  TrainingEventLog::Scalars train = {{"loss", summary.loss}, {"accuracy", summary.accuracy}};
  TrainingEventLog::Scalars validation;
  if (summary.has_validation) {
    validation = {{"loss", summary.val_loss}, {"accuracy", summary.val_accuracy}};
  }
  Check(log_->WriteEpoch(summary.epoch - 1, train, validation, learning_rate_));
}

}  // namespace pstrain
