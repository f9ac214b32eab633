#ifndef PSTRAIN_COMMON_TENSORBOARD_TRAINING_EVENT_LOG_H_
#define PSTRAIN_COMMON_TENSORBOARD_TRAINING_EVENT_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensorboard/event_file_writer.h"

namespace pstrain {

// A training run's TensorBoard logs as Keras' TensorBoard callback lays them out under a
// --logdir: `train/` and `validation/` folders of event files, and the same tags:
//   per epoch (step = the 0-based epoch, as Keras): epoch_loss, epoch_accuracy and every
//   compiled metric as epoch_<name>, in train/; the validation figures under the same
//   tags (no val_ prefix) in validation/; epoch_learning_rate in train/;
//   every --log_every_steps steps (step = the global step): batch_loss,
//   batch_samples_per_second and batch_learning_rate in train/.
// So `tensorboard --logdir=DIR` overlays training and validation curves per tag.
//
// Thread-safe (each writer is).
class TrainingEventLog {
 public:
  using Scalars = std::vector<std::pair<std::string, double>>;

  // Errors: INTERNAL the folders or files cannot be created (named).
  static absl::StatusOr<std::unique_ptr<TrainingEventLog>> Create(const std::string& logdir);

  // `train` and `validation` are figures by Keras name ("loss", "accuracy", ...), written
  // with the "epoch_" prefix; `validation` may be empty (no validation data).
  // Errors: a failed write (named).
  absl::Status WriteEpoch(int epoch_index, const Scalars& train, const Scalars& validation,
                          double learning_rate);

  // Errors: a failed write (named).
  absl::Status WriteSteps(int64_t global_step, double loss, double samples_per_second,
                          double learning_rate);

  const std::string& logdir() const { return logdir_; }

 private:
  TrainingEventLog() = default;

  std::string logdir_;
  std::unique_ptr<EventFileWriter> train_;
  std::unique_ptr<EventFileWriter> validation_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TENSORBOARD_TRAINING_EVENT_LOG_H_
