#ifndef PSTRAIN_COMMON_TRAINING_EPOCH_SUMMARY_H_
#define PSTRAIN_COMMON_TRAINING_EPOCH_SUMMARY_H_

// The figures of one finished epoch and the Keras-style line they are printed as. Every
// trainer reports through it: the parameter-server chief (chief/coordinator.h), the
// one-process and mirrored trainers (worker/fit.h) and the benchmarks, so a user sees the
// same line whichever strategy trains.

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace pstrain {

// Figures of one finished epoch, as Keras prints them.
struct EpochSummary {
  int epoch = 0;  // 1-based
  int epochs = 0;
  double loss = 0;
  double accuracy = 0;
  bool has_validation = false;
  double val_loss = 0;
  double val_accuracy = 0;
  int64_t samples = 0;
  absl::Duration elapsed;
};

// "Epoch 3/10 - loss: 2.2871 - accuracy: 0.1420[ - val_loss: ... - val_accuracy: ...]".
std::string FormatEpochLine(const EpochSummary& summary);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_EPOCH_SUMMARY_H_
