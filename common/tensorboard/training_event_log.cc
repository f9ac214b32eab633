#include "common/tensorboard/training_event_log.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

TrainingEventLog::Scalars Prefixed(const TrainingEventLog::Scalars& figures) {
  TrainingEventLog::Scalars out;
  for (const auto& [name, value] : figures) out.push_back({absl::StrCat("epoch_", name), value});
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingEventLog>> TrainingEventLog::Create(
    const std::string& logdir) {
  std::unique_ptr<TrainingEventLog> log(new TrainingEventLog());
  log->logdir_ = logdir;
  PS_ASSIGN_OR_RETURN(log->train_, EventFileWriter::Create(absl::StrCat(logdir, "/train")));
  PS_ASSIGN_OR_RETURN(log->validation_,
                      EventFileWriter::Create(absl::StrCat(logdir, "/validation")));
  return log;
}

absl::Status TrainingEventLog::WriteEpoch(int epoch_index, const Scalars& train,
                                          const Scalars& validation, double learning_rate) {
  Scalars train_tags = Prefixed(train);
  train_tags.push_back({"epoch_learning_rate", learning_rate});
  PS_RETURN_IF_ERROR(train_->WriteScalars(epoch_index, train_tags));
  if (validation.empty()) return absl::OkStatus();
  return validation_->WriteScalars(epoch_index, Prefixed(validation));
}

absl::Status TrainingEventLog::WriteSteps(int64_t global_step, double loss,
                                          double samples_per_second, double learning_rate) {
  return train_->WriteScalars(global_step, {{"batch_loss", loss},
                                            {"batch_samples_per_second", samples_per_second},
                                            {"batch_learning_rate", learning_rate}});
}

}  // namespace pstrain
