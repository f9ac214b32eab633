#include "pstrain/distributed_model.h"

namespace pstrain::distribute {

ModelOptions ModelOptions::FromJobSpec(const JobSpec& job) {
  ModelOptions options;
  options.keras_model = job.model;
  options.loss = job.loss;
  options.optimizer = job.optimizer;
  options.seed = job.seed;
  options.initial_weights = job.initial_weights;
  options.scale_learning_rate = job.scale_learning_rate;
  options.placement = job.placement;
  options.job = std::make_shared<const JobSpec>(job);
  return options;
}

absl::StatusOr<bool> DistributedModel::RestoreState(const TrainingState*, int*, int64_t*) {
  return absl::UnimplementedError(
      "this strategy's model restores through Strategy::Restore, not a TrainingState");
}

absl::StatusOr<TrainingState> DistributedModel::GetState(int, int64_t) const {
  return absl::UnimplementedError(
      "this strategy's model is saved through Strategy::Save, not as a TrainingState");
}

}  // namespace pstrain::distribute
