#ifndef PSTRAIN_COMMON_TRAINING_TERMINAL_PROGRESS_H_
#define PSTRAIN_COMMON_TRAINING_TERMINAL_PROGRESS_H_

#include <cstdio>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/training/training_observer.h"

namespace pstrain {

// Keras' progress bar on a terminal: "412/938 [=====>......] - ETA: 3s - loss: ... -
// accuracy: ...", redrawn in place at most every 100 ms (drawing every step would cost
// more than a small model's step), for every strategy: the parameter-server chief draws
// the global steps of the epoch. Before the first epoch's end the chief does not know
// how many steps an epoch takes and shows "412/Unknown" as Keras does. OnEpoch clears the
// bar so the epoch line starts on a clean line. Use only when `out` is a terminal.
// Thread-safe.
class TerminalProgress : public TrainingObserver {
 public:
  explicit TerminalProgress(FILE* out) : out_(out) {}

  void OnSteps(const StepsDone& steps) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnEpoch(const EpochSummary& summary) override ABSL_LOCKS_EXCLUDED(mu_);
  // Erases the bar (e.g. before the program prints its last lines).
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FILE* const out_;
  absl::Mutex mu_;
  absl::Time last_draw_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool drawn_ ABSL_GUARDED_BY(mu_) = false;
  int epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t epoch_step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_TERMINAL_PROGRESS_H_
