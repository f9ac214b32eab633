#include "pstrain/strategy.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain::distribute {

absl::StatusOr<std::unique_ptr<DistributedDataset>> Strategy::ExperimentalDistributeDataset(
    std::shared_ptr<const Dataset> data, const DistributedDatasetOptions& options) const {
  return DistributedDataset::Create(std::move(data), options, num_replicas_in_sync(),
                                    first_local_replica(), num_local_replicas());
}

absl::Status Strategy::JoinServer() {
  return absl::FailedPreconditionError(
      absl::StrCat("JoinServer is a parameter_server ps task's; this is ", name(),
                   task().type == Role::kAdmin ? std::string()
                                               : absl::StrCat(" ", TaskIdToString(task()))));
}

absl::StatusOr<std::string> Strategy::Save(const std::string& dir,
                                           const TrainingProgress& progress) {
  (void)dir;
  (void)progress;
  return absl::UnimplementedError(absl::StrCat(
      "Strategy::Save: a custom loop saves under parameter_server; ", name(),
      " checkpoints are Fit's (train --checkpoint_dir)"));
}

absl::StatusOr<TrainingProgress> Strategy::Restore(const std::string& dir) {
  (void)dir;
  return absl::UnimplementedError(absl::StrCat(
      "Strategy::Restore: a custom loop restores under parameter_server; ", name(),
      " checkpoints are Fit's (train --checkpoint_dir)"));
}

absl::Status Strategy::CheckBatch(const DistributedBatch& batch) const {
  if (batch.first_replica != first_local_replica() ||
      static_cast<int>(batch.replicas.size()) != num_local_replicas()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch was split for replicas [", batch.first_replica, ", ",
        batch.first_replica + batch.replicas.size(), ") but this process runs [",
        first_local_replica(), ", ", first_local_replica() + num_local_replicas(),
        "): distribute it with this strategy's ExperimentalDistributeDataset"));
  }
  return absl::OkStatus();
}

absl::Status Strategy::ReduceSizeError(size_t replica, size_t got, size_t want) {
  if (got == 0 && want == 0) return absl::InvalidArgumentError("Reduce: no per-replica values");
  return absl::InvalidArgumentError(absl::StrCat("Reduce: replica value ", replica, " has ", got,
                                                 " numbers, the first has ", want));
}

}  // namespace pstrain::distribute
