#ifndef PSTRAIN_COMMON_TENSORBOARD_TENSORBOARD_FLAGS_H_
#define PSTRAIN_COMMON_TENSORBOARD_TENSORBOARD_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/tensorboard/tensorboard_observer.h"

namespace pstrain {

// The TensorBoard event writer the flags ask for, shared by the chief and train:
//   --logdir=DIR          write TensorBoard event files under DIR/train and
//                         DIR/validation (empty: none)
//   --log_every_steps=N   also the loss, samples per second and learning rate every N
//                         global steps (0: epochs only)
// Returns null when --logdir is empty. `learning_rate` is the optimizer's as it runs.
// Errors: INVALID_ARGUMENT a negative --log_every_steps; INTERNAL DIR cannot be written.
absl::StatusOr<std::unique_ptr<TensorBoardObserver>> TensorBoardObserverFromFlags(
    double learning_rate);

// --logdir as given (empty: none): the evaluator task writes its own run, DIR/eval.
std::string TensorBoardLogdirFromFlags();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TENSORBOARD_TENSORBOARD_FLAGS_H_
