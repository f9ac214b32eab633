#ifndef PSTRAIN_PSTRAIN_INTERNAL_SYNC_STRATEGY_H_
#define PSTRAIN_PSTRAIN_INTERNAL_SYNC_STRATEGY_H_

// The synchronous strategies behind the public Strategy (pstrain/strategy.h): default,
// mirrored and multi_worker_mirrored, over the core strategies made by the one factory
// (distribute/create_sync_strategy.h; `train` makes its own setup with it and hands it to
// FromSetup), and their models over distribute/replicated_model.h. Fit (pstrain/fit.h) is
// a user of these like any custom loop, so both take the same synchronous step.
//
// Thread-safety: as Strategy. SyncModel::ComputeGradients and ApplyGradients run on the
// replicas' threads, each touching only its replica's slots.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "common/math/backend.h"
#include "pstrain/distributed_model.h"
#include "common/training/strategy_kind.h"
#include "pstrain/strategy.h"
#include "distribute/create_sync_strategy.h"
#include "distribute/replicated_model.h"
#include "distribute/strategy.h"

namespace pstrain::distribute::internal {

class SyncModel;

class SyncStrategy : public Strategy {
 public:
  // options.strategy is kDefault, kMirrored or kMultiWorkerMirrored.
  // Errors: as CreateStrategy.
  static absl::StatusOr<std::unique_ptr<SyncStrategy>> Create(const StrategyOptions& options);
  // Over a core strategy already made (by CreateSyncStrategy, as `train` makes it to serve
  // the all-reduce on its daemon's server; or by a test over an in-process ring).
  // `setup.strategy` must be set; `task` is the process's task in TF_CONFIG (a default
  // TaskId without a cluster).
  static std::unique_ptr<SyncStrategy> FromSetup(StrategyKind kind, SyncStrategySetup setup,
                                                 TaskId task);
  // Over a core strategy made by hand (a test's: mirrored on threads, multi-worker over an
  // in-process ring), its replicas on the CPU; its kind read from its replicas (some in
  // other processes: multi_worker_mirrored; several here: mirrored; else default).
  static std::unique_ptr<SyncStrategy> Over(std::unique_ptr<::pstrain::Strategy> core);
  ~SyncStrategy() override;

  StrategyKind kind() const override { return kind_; }
  std::string name() const override { return core()->name(); }
  int num_replicas_in_sync() const override { return core()->num_replicas_in_sync(); }
  const TaskId& task() const override { return task_; }
  bool is_chief() const override { return core()->first_local_replica() == 0; }
  absl::StatusOr<std::unique_ptr<DistributedModel>> CreateModel(
      const ModelOptions& options) override;

  // SyncModel's: the models whose updates Run takes when the replicas are done.
  void Unregister(SyncModel* model);

 protected:
  int first_local_replica() const override { return core()->first_local_replica(); }
  int num_local_replicas() const override { return core()->num_local_replicas(); }
  absl::Status RunReplicas(const std::function<absl::Status(const ReplicaContext&)>& fn,
                           const DistributedBatch& batch) override;
  absl::Status SumAcrossWorkers(std::vector<double>* values) override;

 private:
  SyncStrategy() = default;
  ::pstrain::Strategy* core() const { return setup_.strategy.get(); }

  StrategyKind kind_ = StrategyKind::kDefault;
  // The core strategy, its ring (multi_worker_mirrored) and the replicas' backends.
  ::pstrain::SyncStrategySetup setup_;
  TaskId task_;
  std::vector<SyncModel*> models_;  // Not owned; each unregisters itself.
};

// A model of a synchronous strategy (see pstrain/distributed_model.h).
class SyncModel : public DistributedModel {
 public:
  // `strategy` is not owned and must outlive the model.
  SyncModel(SyncStrategy* strategy, std::unique_ptr<ReplicatedModel> model, uint64_t seed,
            LossConfig loss, int first_local, int num_local);
  ~SyncModel() override;

  const std::vector<VariableSpec>& variables() const override { return model_->variables(); }
  absl::StatusOr<Gradients> ComputeGradients(const ReplicaContext& ctx,
                                             const ReplicaBatch& batch) override;
  absl::Status ApplyGradients(const ReplicaContext& ctx, Gradients gradients) override;
  absl::StatusOr<std::vector<Tensor>> GetWeights() override { return model_->weights(); }
  absl::StatusOr<EvaluationResult> Evaluate(const Dataset& data, int64_t batch_size) override;
  absl::Status CheckData(const Dataset& data, const std::string& what) const override;
  absl::Status CheckInSync() override { return model_->CheckInSync(); }
  absl::StatusOr<bool> RestoreState(const TrainingState* state, int* progress_epochs,
                                    int64_t* progress_step) override;
  absl::StatusOr<TrainingState> GetState(int epochs_done, int64_t global_step) const override {
    return model_->State(epochs_done, global_step);
  }
  int64_t skipped_updates() const override { return skipped_; }

  // After every replica of a step ran (`ran_ok`: all of them succeeded): the one update
  // from the gradients they applied, if they did; nothing when none did (a step that
  // only evaluates). Clears the step's slots either way.
  // Errors: FAILED_PRECONDITION some replicas applied and others did not (named);
  // ReplicatedModel::ApplyGradients'.
  absl::Status FinishStep(bool ran_ok);

 private:
  SyncStrategy* const strategy_;  // Not owned.
  const std::unique_ptr<ReplicatedModel> model_;
  const uint64_t seed_;
  const LossConfig loss_;
  const int first_local_;
  // The step's slots, by local replica: whether it applied, its rows.
  std::vector<char> applied_;
  std::vector<int64_t> rows_;
  std::vector<int64_t> global_rows_;
  int64_t steps_ = 0;    // updates taken or skipped (from a restored state's step); seeds dropout
  int64_t skipped_ = 0;  // updates dropped for a non-finite gradient
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_SYNC_STRATEGY_H_
