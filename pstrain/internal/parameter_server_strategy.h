#ifndef PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_STRATEGY_H_
#define PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_STRATEGY_H_

// The parameter_server strategy behind the public Strategy (pstrain/strategy.h), as
// TensorFlow's ParameterServerStrategy with a ClusterCoordinator: the chief creates the
// variables on the ps tasks and schedules functions; each worker runs them, one replica
// each, computing gradients with the weights it pulled (worker/ps_trainer.h) and pushing
// them to the ps, whose optimizer applies them asynchronously; a ps serves.
//
// Thread-safety: as Strategy.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/math/backend.h"
#include "pstrain/internal/parameter_server_cluster.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

class ParameterServerStrategy : public Strategy {
 public:
  // Errors: as CreateStrategy.
  static absl::StatusOr<std::unique_ptr<ParameterServerStrategy>> Create(
      const StrategyOptions& options);

  std::string name() const override { return "parameter_server"; }
  int num_replicas_in_sync() const override { return 1; }
  const TaskId& task() const override { return cluster_->config().task; }
  bool is_chief() const override { return cluster_->task_type() == "chief"; }
  // Chief: creates the variables on the ps tasks (placed by options.placement), the
  // learning rate scaled by the workers with scale_learning_rate; worker: the model it
  // computes on and the ps clients it pushes through. Errors: FAILED_PRECONDITION on a ps
  // task or for a second model; the ps's errors (named).
  absl::StatusOr<std::unique_ptr<DistributedModel>> CreateModel(
      const ModelOptions& options) override;
  absl::Status JoinServer() override;
  ParameterServerCluster* parameter_server_cluster() override { return cluster_.get(); }

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
  std::unique_ptr<Backend> first_backend_;  // made at creation so a bad device fails at once
  std::unique_ptr<ParameterServerCluster> cluster_;
  bool has_model_ = false;
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_STRATEGY_H_
