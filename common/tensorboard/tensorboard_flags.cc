#include "common/tensorboard/tensorboard_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, logdir, "",
          "Write TensorBoard event files here (train/ and validation/, as Keras' TensorBoard "
          "callback does); empty = none");
ABSL_FLAG(int64_t, log_every_steps, 100,
          "With --logdir: also log loss, samples/s and learning rate every N global steps "
          "(0 = per epoch only)");

namespace pstrain {

absl::StatusOr<std::unique_ptr<TensorBoardObserver>> TensorBoardObserverFromFlags(
    double learning_rate) {
  const std::string logdir = absl::GetFlag(FLAGS_logdir);
  const int64_t every = absl::GetFlag(FLAGS_log_every_steps);
  if (every < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--log_every_steps=", every, " must be >= 0"));
  }
  if (logdir.empty()) return std::unique_ptr<TensorBoardObserver>();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<TrainingEventLog> log, TrainingEventLog::Create(logdir));
  LogInfo(absl::StrCat("TensorBoard event files in ", logdir, " (tensorboard --logdir=", logdir,
                       ")"));
  return std::make_unique<TensorBoardObserver>(std::move(log), every, learning_rate);
}

std::string TensorBoardLogdirFromFlags() { return absl::GetFlag(FLAGS_logdir); }

}  // namespace pstrain
