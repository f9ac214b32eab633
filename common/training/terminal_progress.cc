#include "common/training/terminal_progress.h"

#include <string>

#include "absl/strings/str_format.h"

namespace pstrain {

void TerminalProgress::OnSteps(const StepsDone& steps) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  // Several workers' chunks end out of order: show the furthest point of this epoch.
  if (steps.epoch != epoch_) {
    epoch_ = steps.epoch;
    epoch_step_ = 0;
  }
  if (steps.epoch_step < epoch_step_) return;
  epoch_step_ = steps.epoch_step;
  const bool last = steps.epoch_steps > 0 && steps.epoch_step >= steps.epoch_steps;
  if (!last && now - last_draw_ < absl::Milliseconds(100)) return;
  last_draw_ = now;
  std::string line;
  if (steps.epoch_steps > 0) {
    line = FormatProgressBar(steps.epoch_step, steps.epoch_steps, steps.epoch_elapsed,
                             steps.epoch_loss, steps.epoch_accuracy);
  } else {
    line = absl::StrFormat(
        "%d/Unknown - %.0fs %s - loss: %.4f - accuracy: %.4f", steps.epoch_step,
        absl::ToDoubleSeconds(steps.epoch_elapsed),
        FormatTimePerUnit(steps.epoch_elapsed / std::max<int64_t>(steps.epoch_step, 1), "step"),
        steps.epoch_loss, steps.epoch_accuracy);
  }
  std::fprintf(out_, "\r\033[K%s", line.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void TerminalProgress::OnEpoch(const EpochSummary&) { Clear(); }

void TerminalProgress::Clear() {
  absl::MutexLock lock(&mu_);
  ClearLocked();
}

void TerminalProgress::ClearLocked() {
  if (!drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace pstrain
