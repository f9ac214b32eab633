#include "pstrain/internal/sync_strategy.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/daemon/daemon_options.h"
#include "common/logging.h"
#include "common/rpc/grpc_util.h"
#include "common/status_macros.h"
#include "pstrain/internal/task_security.h"
#include "pstrain/internal/tf_config.h"
#include "distribute/allreduce/collective_selection.h"

namespace pstrain::distribute::internal {

absl::StatusOr<std::unique_ptr<SyncStrategy>> SyncStrategy::Create(
    const StrategyOptions& options) {
  SyncStrategySetup setup;
  TaskId task;
  SyncStrategyOptions so;
  so.kind = options.strategy;
  so.device = options.device;
  so.devices = options.devices;
  if (options.strategy == StrategyKind::kMultiWorkerMirrored) {
    PS_ASSIGN_OR_RETURN(so.config, ReadTfConfig(options));
    task = so.config.task;
    PS_ASSIGN_OR_RETURN(so.collective, ParseCollectiveKind(options.collective));
    so.multi_worker.ring.timeout = options.collective_timeout;
    so.multi_worker.startup_timeout = options.startup_timeout;
    // The job's token or certificates before the ring makes any channel.
    PS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                        SecureTask(options, so.config));
    // A server of the ring's own on this task's port (every interface unless loopback).
    so.serve = [credentials](grpc::Service* service,
                             const std::string& task_address) -> absl::StatusOr<RunningServer> {
      ServerOptions server;
      PS_ASSIGN_OR_RETURN(server.listen_address, ListenAddressFor(task_address));
      server.credentials = credentials;
      server.services = {service};
      return StartServer(server);
    };
    SetLogTag(absl::StrCat(RoleName(so.config.task.type), so.config.task.index));
  }
  PS_RETURN_IF_ERROR(CreateSyncStrategy(so, &setup));
  if (options.strategy == StrategyKind::kMirrored) {
    LogInfo(absl::StrCat("mirrored strategy, num_replicas_in_sync=", setup.devices.size(), " (",
                         absl::StrJoin(setup.devices, ", "), ")"));
  }
  return FromSetup(options.strategy, std::move(setup), std::move(task));
}

std::unique_ptr<SyncStrategy> SyncStrategy::FromSetup(StrategyKind kind, SyncStrategySetup setup,
                                                      TaskId task) {
  std::unique_ptr<SyncStrategy> s(new SyncStrategy());
  s->kind_ = kind;
  s->setup_ = std::move(setup);
  s->task_ = std::move(task);
  return s;
}

std::unique_ptr<SyncStrategy> SyncStrategy::Over(std::unique_ptr<::pstrain::Strategy> core) {
  StrategyKind kind = StrategyKind::kDefault;
  if (core->num_local_replicas() != core->num_replicas_in_sync()) {
    kind = StrategyKind::kMultiWorkerMirrored;
  } else if (core->num_replicas_in_sync() > 1) {
    kind = StrategyKind::kMirrored;
  }
  SyncStrategySetup setup;
  setup.strategy = std::move(core);
  setup.device = "cpu";
  return FromSetup(kind, std::move(setup), TaskId());
}

SyncStrategy::~SyncStrategy() {
  // Models outliving their strategy must not call back into it.
  models_.clear();
}

absl::StatusOr<std::unique_ptr<DistributedModel>> SyncStrategy::CreateModel(
    const ModelOptions& options) {
  ReplicatedModelOptions ro;
  ro.keras_model = options.keras_model;
  ro.loss = options.loss;
  ro.optimizer = options.optimizer;
  ro.seed = options.seed;
  ro.initial_weights = options.initial_weights;
  ro.scale_learning_rate = options.scale_learning_rate;
  ro.batch_size = options.batch_size;
  ro.make_backend = [this](int replica) { return setup_.MakeBackend(replica); };
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ReplicatedModel> replicated,
                      ReplicatedModel::Create(core(), ro));
  // Every worker starts from the same weights (and the first collective is where the
  // workers of a multi-worker job meet).
  PS_RETURN_IF_ERROR(replicated->CheckInSync());
  auto model = std::make_unique<SyncModel>(this, std::move(replicated), options.seed,
                                           options.loss, first_local_replica(),
                                           num_local_replicas());
  models_.push_back(model.get());
  return model;
}

void SyncStrategy::Unregister(SyncModel* model) {
  models_.erase(std::remove(models_.begin(), models_.end(), model), models_.end());
}

absl::Status SyncStrategy::RunReplicas(
    const std::function<absl::Status(const ReplicaContext&)>& fn, const DistributedBatch& batch) {
  PS_RETURN_IF_ERROR(CheckBatch(batch));
  const int first = first_local_replica();
  const int replicas = num_replicas_in_sync();
  const absl::Status ran = core()->Run([&](int replica) -> absl::Status {
    ReplicaContext ctx;
    ctx.replica_id_in_sync_group = replica;
    ctx.num_replicas_in_sync = replicas;
    ctx.local_index = replica - first;
    return fn(ctx);
  });
  // Every model's update, in creation order (the same order in every worker process).
  absl::Status finished = absl::OkStatus();
  for (SyncModel* model : models_) {
    absl::Status status = model->FinishStep(ran.ok());
    if (finished.ok()) finished = status;
  }
  return ran.ok() ? finished : ran;
}

absl::Status SyncStrategy::SumAcrossWorkers(std::vector<double>* values) {
  if (core()->num_local_replicas() == core()->num_replicas_in_sync()) return absl::OkStatus();
  std::vector<float> floats(values->begin(), values->end());
  PS_RETURN_IF_ERROR(core()->CrossWorkerSum({absl::MakeSpan(floats)}));
  values->assign(floats.begin(), floats.end());
  return absl::OkStatus();
}

SyncModel::SyncModel(SyncStrategy* strategy, std::unique_ptr<ReplicatedModel> model,
                     uint64_t seed, LossConfig loss, int first_local, int num_local)
    : strategy_(strategy),
      model_(std::move(model)),
      seed_(seed),
      loss_(std::move(loss)),
      first_local_(first_local),
      applied_(num_local, 0),
      rows_(num_local, 0),
      global_rows_(num_local, 0) {}

SyncModel::~SyncModel() { strategy_->Unregister(this); }

absl::StatusOr<Gradients> SyncModel::ComputeGradients(const ReplicaContext& ctx,
                                                      const ReplicaBatch& batch) {
  const int replica = ctx.replica_id_in_sync_group;
  PS_ASSIGN_OR_RETURN(
      StepResult metrics,
      model_->ComputeGradients(replica, batch.x, batch.y,
                               ReplicaDropoutSeed(seed_, steps_, replica)));
  Gradients g;
  g.values = std::move(model_->gradients(replica));
  g.metrics = metrics;
  g.replica = replica;
  g.rows = batch.rows();
  g.global_batch_size = batch.global_batch_size;
  return g;
}

absl::Status SyncModel::ApplyGradients(const ReplicaContext& ctx, Gradients gradients) {
  const int replica = ctx.replica_id_in_sync_group;
  const int local = replica - first_local_;
  if (gradients.replica != replica || local < 0 || local >= static_cast<int>(applied_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", replica,
                                                   " was handed the gradients of replica ",
                                                   gradients.replica));
  }
  if (gradients.global_batch_size < gradients.rows || gradients.rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("gradients of ", gradients.rows,
                                                   " rows of a global batch of ",
                                                   gradients.global_batch_size));
  }
  // Back into the replica's buffer (whose tensors TrainStep reuses next step).
  model_->gradients(replica) = std::move(gradients.values);
  rows_[local] = gradients.rows;
  global_rows_[local] = gradients.global_batch_size;
  applied_[local] = 1;
  return absl::OkStatus();
}

absl::Status SyncModel::FinishStep(bool ran_ok) {
  const size_t applied = std::count(applied_.begin(), applied_.end(), 1);
  std::vector<int> missing;
  for (size_t i = 0; i < applied_.size(); ++i) {
    if (!applied_[i]) missing.push_back(first_local_ + static_cast<int>(i));
  }
  std::fill(applied_.begin(), applied_.end(), 0);
  if (!ran_ok || applied == 0) return absl::OkStatus();
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replica ", absl::StrJoin(missing, ", "),
        " did not apply gradients while the others did: every replica of a step calls "
        "ApplyGradients"));
  }
  for (size_t i = 1; i < global_rows_.size(); ++i) {
    if (global_rows_[i] != global_rows_[0]) {
      return absl::InvalidArgumentError("the replicas' gradients are of different global batches");
    }
  }
  PS_ASSIGN_OR_RETURN(const bool taken, model_->ApplyGradients(rows_, global_rows_[0], steps_));
  if (!taken) ++skipped_;
  ++steps_;  // a skipped non-finite step still counts: the next step's dropout differs
  return absl::OkStatus();
}

absl::StatusOr<bool> SyncModel::RestoreState(const TrainingState* state, int* progress_epochs,
                                             int64_t* progress_step) {
  PS_ASSIGN_OR_RETURN(const bool restored,
                      model_->Restore(state, progress_epochs, progress_step));
  if (restored) steps_ = *progress_step;
  return restored;
}

absl::StatusOr<EvaluationResult> SyncModel::Evaluate(const Dataset& data, int64_t batch_size) {
  PS_RETURN_IF_ERROR(CheckData(data, "the evaluation data"));
  return model_->Evaluate(data, batch_size);
}

absl::Status SyncModel::CheckData(const Dataset& data, const std::string& what) const {
  return CheckDataFitsModel(data, model_->model(), loss_, what);
}

}  // namespace pstrain::distribute::internal
