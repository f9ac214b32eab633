#include "common/training/epoch_summary.h"

#include "absl/strings/str_format.h"

namespace pstrain {

std::string FormatEpochLine(const EpochSummary& s) {
  std::string line = absl::StrFormat("Epoch %d/%d - loss: %.4f - accuracy: %.4f", s.epoch,
                                     s.epochs, s.loss, s.accuracy);
  if (s.has_validation) {
    absl::StrAppendFormat(&line, " - val_loss: %.4f - val_accuracy: %.4f", s.val_loss,
                          s.val_accuracy);
  }
  return line;
}

}  // namespace pstrain
