#ifndef PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_STRATEGY_H_
#define PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_STRATEGY_H_

// The parameter_server strategy behind the public Strategy (pstrain/strategy.h), as
// TensorFlow's ParameterServerStrategy with a ClusterCoordinator: the chief creates the
// variables on the ps tasks, schedules functions and evaluates (the dense variables
// pulled, an Embedding table by each batch's rows: ps_server/client/sharded_evaluator.h);
// each worker runs them, one replica each, computing gradients with the weights it pulled
// (ps_server/client/ps_trainer.h; an Embedding table by the batch's rows) and pushing them to the
// ps, whose optimizer applies them asynchronously; a ps serves.
//
// Thread-safety: as Strategy.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/checkpoint/checkpoint.h"
#include "common/math/backend.h"
#include "common/model/job_spec.h"
#include "ps_server/client/checkpointer.h"
#include "ps_server/client/sharded_variables.h"
#include "pstrain/internal/role_task.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

class ParameterServerStrategy : public Strategy {
 public:
  // Errors: as CreateStrategy.
  static absl::StatusOr<std::unique_ptr<ParameterServerStrategy>> Create(
      const StrategyOptions& options);
  // The task goes first: the chief's scheduler's threads may call RecoverPs, which uses
  // the variables and checkpoints below.
  ~ParameterServerStrategy() override { task_.reset(); }

  StrategyKind kind() const override { return StrategyKind::kParameterServer; }
  std::string name() const override { return "parameter_server"; }
  int num_replicas_in_sync() const override { return 1; }
  const TaskId& task() const override { return task_->config().task; }
  bool is_chief() const override { return task_->role() == Role::kChief; }
  // Chief: creates the variables on the ps tasks (placed by options.placement), the
  // learning rate scaled by the workers with scale_learning_rate; worker: the model it
  // computes on and the ps clients it pushes through. Errors: FAILED_PRECONDITION on a ps
  // task or for a second model; the ps's errors (named).
  absl::StatusOr<std::unique_ptr<DistributedModel>> CreateModel(
      const ModelOptions& options) override;
  absl::Status JoinServer() override;
  RoleTask* parameter_server_task() override { return task_.get(); }
  // Chief: checkpoints of the variables on the ps tasks (see Strategy::Save).
  absl::StatusOr<std::string> Save(const std::string& dir, const TrainingProgress& progress)
      override ABSL_LOCKS_EXCLUDED(checkpoint_mu_);
  absl::StatusOr<TrainingProgress> Restore(const std::string& dir) override
      ABSL_LOCKS_EXCLUDED(checkpoint_mu_);
  void LeaveTasksRunning() override;

  // Chief: waits (StrategyOptions::ps_recovery_timeout) until every ps answers and
  // recreates the shards of any that came back empty, from the newest checkpoint in the
  // folder last saved to or restored from, else the checkpoint restored, else the initial
  // values (PsRecovery::Recover). What the scheduler calls when a function failed because
  // a ps did. Errors: FAILED_PRECONDITION before CreateModel or on another task;
  // PsRecovery::Recover's.
  absl::Status RecoverPs() ABSL_LOCKS_EXCLUDED(checkpoint_mu_);

 protected:
  int first_local_replica() const override { return 0; }
  int num_local_replicas() const override { return 1; }
  absl::Status RunReplicas(const std::function<absl::Status(const ReplicaContext&)>& fn,
                           const DistributedBatch& batch) override;
  // Each worker's function stands alone: nothing to add across workers.
  absl::Status SumAcrossWorkers(std::vector<double>* values) override {
    (void)values;
    return absl::OkStatus();
  }

 private:
  ParameterServerStrategy() = default;

  std::string device_;
  absl::Duration ps_recovery_timeout_;
  std::unique_ptr<Backend> first_backend_;  // made at creation so a bad device fails at once
  // Errors: FAILED_PRECONDITION unless this is the chief and CreateModel made the
  // variables (`what` names the call).
  absl::Status CheckChiefWithVariables(const char* what) const;
  // The Checkpointer of folder `dir` (made when it is another folder than the last).
  Checkpointer* CheckpointerFor(const std::string& dir)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_);
  absl::Status RecoverPsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_);

  // This task, as its role runs it (chief, worker or ps).
  std::unique_ptr<RoleTask> task_;
  bool has_model_ = false;
  // Chief, once CreateModel made the variables: where they live, and what a checkpoint
  // records of the job (the model, compile settings and seed).
  std::unique_ptr<ShardedVariables> variables_;
  JobSpec checkpoint_job_;

  // State below is protected by checkpoint_mu_: Save and Restore come from the loop's
  // thread, RecoverPs from the scheduler's; they run one at a time.
  absl::Mutex checkpoint_mu_;
  // The folder last saved to or restored from (null: none yet).
  std::unique_ptr<Checkpointer> checkpointer_ ABSL_GUARDED_BY(checkpoint_mu_);
  // The checkpoint Restore read: a ps that comes back empty before the first Save is
  // restored from it.
  std::unique_ptr<CheckpointReader> restored_ ABSL_GUARDED_BY(checkpoint_mu_);
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_STRATEGY_H_
