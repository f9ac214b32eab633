#include "common/training/epoch_summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pstrain {

std::string FormatTimePerUnit(absl::Duration per_unit, const char* unit) {
  const double seconds = absl::ToDoubleSeconds(per_unit);
  if (seconds >= 1 || seconds <= 0) return absl::StrFormat("%.0fs/%s", seconds, unit);
  if (seconds >= 1e-3) return absl::StrFormat("%.0fms/%s", seconds * 1e3, unit);
  return absl::StrFormat("%.0fus/%s", seconds * 1e6, unit);
}

std::string FormatEta(absl::Duration eta) {
  const int64_t s = absl::ToInt64Seconds(eta < absl::ZeroDuration() ? absl::ZeroDuration() : eta);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, (s % 3600) / 60, s % 60);
  if (s >= 60) return absl::StrFormat("%d:%02d", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string FormatProgressBar(int64_t step, int64_t steps, absl::Duration elapsed, double loss,
                              double accuracy) {
  constexpr int kWidth = 30;
  const int done = steps > 0 ? static_cast<int>(kWidth * std::min(step, steps) / steps) : 0;
  std::string bar(kWidth, '.');
  for (int i = 0; i < done; ++i) bar[i] = '=';
  if (done < kWidth) bar[done] = '>';
  const int digits = static_cast<int>(absl::StrCat(steps).size());
  std::string line = absl::StrFormat("%*d/%d [%s]", digits, step, steps, bar);
  if (step >= steps) {
    absl::StrAppend(&line, " - ", absl::StrFormat("%.0fs", absl::ToDoubleSeconds(elapsed)), " ",
                    FormatTimePerUnit(elapsed / std::max<int64_t>(steps, 1), "step"));
  } else if (step > 0) {
    absl::StrAppend(&line, " - ETA: ", FormatEta(elapsed / step * (steps - step)));
  }
  absl::StrAppendFormat(&line, " - loss: %.4f - accuracy: %.4f", loss, accuracy);
  return line;
}

std::string FormatEpochLine(const EpochSummary& s) {
  std::string line = absl::StrFormat("Epoch %d/%d", s.epoch, s.epochs);
  if (s.steps > 0) {
    absl::StrAppendFormat(&line, " - %d/%d - %.0fs %s", s.steps, s.steps,
                          absl::ToDoubleSeconds(s.elapsed),
                          FormatTimePerUnit(s.elapsed / s.steps, "step"));
  }
  absl::StrAppendFormat(&line, " - loss: %.4f - accuracy: %.4f", s.loss, s.accuracy);
  if (s.has_validation) {
    absl::StrAppendFormat(&line, " - val_loss: %.4f - val_accuracy: %.4f", s.val_loss,
                          s.val_accuracy);
  }
  return line;
}

}  // namespace pstrain
