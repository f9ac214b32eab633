#ifndef PSTRAIN_COMMON_TRAINING_EPOCH_SUMMARY_H_
#define PSTRAIN_COMMON_TRAINING_EPOCH_SUMMARY_H_

// The figures of one finished epoch and the Keras-style line they are printed as. Every
// trainer reports through it: the parameter-server chief (chief/coordinator.h), the
// one-process and mirrored trainers (pstrain/fit.h) and the benchmarks, so a user sees the
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
  // Optimizer steps the epoch took (global steps, across workers), and its wall time
  // from its first step to the end of its validation.
  int64_t steps = 0;
  absl::Duration elapsed;
};

// "Epoch 3/10 - 938/938 - 2s 2ms/step - loss: 2.2871 - accuracy: 0.1420[ - val_loss: ...
// - val_accuracy: ...]": Keras' per-epoch figures, with its timing ("938/938 - 2s
// 2ms/step"), which is left out when steps is 0.
std::string FormatEpochLine(const EpochSummary& summary);

// Keras' time per unit: "2s/step" from a second up, "12ms/step", "350us/step".
std::string FormatTimePerUnit(absl::Duration per_unit, const char* unit);

// Keras' ETA: "45s", "3:07" (minutes), "1:02:03" (hours).
std::string FormatEta(absl::Duration eta);

// A Keras progress bar line (without a line end), for a terminal:
// "412/938 [============>.................] - ETA: 1s - loss: 0.5012 - accuracy: 0.8221".
// `elapsed` is since the epoch's first step; the ETA assumes the rest goes as fast.
std::string FormatProgressBar(int64_t step, int64_t steps, absl::Duration elapsed, double loss,
                              double accuracy);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_EPOCH_SUMMARY_H_
