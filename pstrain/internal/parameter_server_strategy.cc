#include "pstrain/internal/parameter_server_strategy.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/math/backend_factory.h"
#include "common/math/cpu_backend.h"
#include "common/model/optimizer.h"
#include "common/sharding/placement.h"
#include "common/status_macros.h"
#include "common/training/evaluator.h"
#include "ps_server/client/ps_recovery.h"
#include "ps_server/client/sharded_evaluator.h"
#include "ps_server/client/sharded_variables.h"
#include "pstrain/internal/chief_task.h"
#include "pstrain/internal/placement_fingerprint.h"
#include "pstrain/internal/start_role_task.h"
#include "pstrain/internal/tf_config.h"
#include "pstrain/internal/worker_task.h"
#include "pstrain/preemption.h"
#include "ps_server/client/ps_trainer.h"
#include "distribute/replicated_model.h"

namespace pstrain::distribute::internal {
namespace {

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const ModelOptions& options, Backend* backend) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      Model::FromKerasJson(options.keras_model, backend));
  PS_RETURN_IF_ERROR(model->SetLoss(options.loss));
  return model;
}

std::vector<VariableShape> ShapesOf(const Model& model) {
  std::vector<VariableShape> shapes;
  for (const VariableSpec& spec : model.variables()) shapes.push_back({spec.name, spec.shape});
  return shapes;
}

constexpr char kRunOnWorkers[] =
    "on the parameter_server chief, steps run on the workers: schedule a function that "
    "calls Strategy::Run with ClusterCoordinator::Schedule";

// What the chief's and a worker's models share: a model of their own (its variables, and
// the data it takes), evaluated on the weights GetWeights pulls.
class PsModel : public DistributedModel {
 public:
  // `eval_model` may be null: evaluations then use `model` (a chief, which never trains).
  PsModel(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model,
          std::unique_ptr<Model> eval_model, LossConfig loss)
      : backend_(std::move(backend)),
        model_(std::move(model)),
        eval_model_(std::move(eval_model)),
        loss_(std::move(loss)) {}

  const std::vector<VariableSpec>& variables() const override { return model_->variables(); }

  absl::StatusOr<EvaluationResult> Evaluate(const Dataset& data, int64_t batch_size) override {
    PS_RETURN_IF_ERROR(CheckData(data, "the evaluation data"));
    PS_ASSIGN_OR_RETURN(std::vector<Tensor> weights, GetWeights());
    return EvaluateOn(eval_model_ != nullptr ? eval_model_.get() : model_.get(), weights, data,
                      batch_size);
  }

  absl::Status CheckData(const Dataset& data, const std::string& what) const override {
    return CheckDataFitsModel(data, *model_, loss_, what);
  }

 protected:
  Model* model() const { return model_.get(); }

 private:
  const std::unique_ptr<Backend> backend_;
  const std::unique_ptr<Model> model_;
  const std::unique_ptr<Model> eval_model_;
  const LossConfig loss_;
};

// The chief's view: the variables on the ps tasks (the strategy's), evaluated as the
// daemons' chief evaluates them (ps_server/client/sharded_evaluator.h): the dense
// variables pulled, a first-layer Embedding's table by the rows each validation batch
// needs, so the chief never holds the table. GetWeights (model.get_weights) still pulls
// every variable whole: that is what it asks for.
class ChiefModel : public PsModel {
 public:
  ChiefModel(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model, LossConfig loss)
      : PsModel(std::move(backend), std::move(model), nullptr, std::move(loss)) {}

  // Places the variables and creates them on the ps tasks with their initial values;
  // returns them for the strategy to own (it must outlive this model).
  absl::StatusOr<std::unique_ptr<ShardedVariables>> CreateVariables(
      ChiefTask* chief, const ModelOptions& options) {
    OptimizerConfig optimizer = options.optimizer;
    if (options.scale_learning_rate) {
      // Every worker pushes its own batch's gradient: the rate grows with the workers.
      optimizer.set_learning_rate(optimizer.learning_rate() *
                                  static_cast<float>(chief->num_workers()));
    }
    // Non-trainable variables (BatchNormalization's moving statistics) live on the ps too,
    // folding in each push's batch statistics as a moving average (as the chief's job does).
    AddMovingAverageRules(variables(), &optimizer);
    PS_RETURN_IF_ERROR(chief->WaitForPs());
    auto sharded = std::make_unique<ShardedVariables>(model(), chief->ps_clients(), optimizer,
                                                      ConsistencyConfig());
    sharded->SetInitialValues(options.initial_weights);
    PS_RETURN_IF_ERROR(sharded->Create(options.placement, options.seed));
    chief->set_placement_fingerprint(PlacementFingerprint(sharded->placement()));
    evaluator_ = std::make_unique<ShardedEvaluator>(model(), sharded.get(), chief->ps_clients());
    LogInfo(absl::StrCat("created ", variables().size(), " variables on ",
                         chief->num_ps(), " ps tasks"));
    sharded_ = sharded.get();
    return sharded;
  }

  absl::StatusOr<Gradients> ComputeGradients(const ReplicaContext&, const ReplicaBatch&) override {
    return absl::FailedPreconditionError(kRunOnWorkers);
  }
  absl::Status ApplyGradients(const ReplicaContext&, Gradients) override {
    return absl::FailedPreconditionError(kRunOnWorkers);
  }
  absl::StatusOr<std::vector<Tensor>> GetWeights() override { return sharded_->Pull(); }

  // The custom loop evaluates from its one thread (ShardedEvaluator is not thread-safe).
  absl::StatusOr<EvaluationResult> Evaluate(const Dataset& data, int64_t batch_size) override {
    PS_RETURN_IF_ERROR(CheckData(data, "the evaluation data"));
    if (evaluator_ == nullptr) {
      return absl::FailedPreconditionError("Evaluate: the variables were not created");
    }
    return evaluator_->Evaluate(data, batch_size);
  }

 private:
  const ShardedVariables* sharded_ = nullptr;  // Not owned: the strategy's.
  std::unique_ptr<ShardedEvaluator> evaluator_;
};

// What a checkpoint records of the job a custom loop runs: its job spec when the model
// came from one (tools/evaluate rebuilds the model and reads the data from it), else the
// model, compile settings and seed it was made from.
JobSpec CheckpointJob(const ModelOptions& options) {
  if (options.job != nullptr) {
    JobSpec job = *options.job;
    job.strategy = StrategyKind::kParameterServer;
    return job;
  }
  JobSpec job;
  *job.model = options.keras_model;
  job.loss = options.loss;
  job.optimizer = options.optimizer;
  job.metrics = {"accuracy"};
  job.seed = options.seed;
  job.strategy = StrategyKind::kParameterServer;
  job.scale_learning_rate = options.scale_learning_rate;
  job.placement = options.placement;
  return job;
}

// A worker's view: its own model, the weights it last pulled, pushes to the ps. A model
// whose first layer is an Embedding trains it by rows, as the daemons' workers do
// (PsTrainer's EmbeddingTraffic::kRowSparse): each step pulls and pushes only the rows of
// the batch's ids, so the worker never holds the table, and its gradient is the batch's
// compact one (Gradients in pstrain/distributed_model.h).
class WorkerModel : public PsModel {
 public:
  WorkerModel(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model,
              std::unique_ptr<Model> eval_model, LossConfig loss)
      : PsModel(std::move(backend), std::move(model), std::move(eval_model), std::move(loss)) {}

  // Places the variables as the chief does (the same pure function of the model, the
  // policy and the ps count) and makes the trainer that pulls and pushes them.
  absl::Status Connect(WorkerTask* task, const ModelOptions& options) {
    const int worker = task->config().task.index;
    PS_ASSIGN_OR_RETURN(std::vector<VariablePlacementEntry> placement,
                        PlaceVariables(ShapesOf(*model()), task->num_ps(), options.placement));
    task->function_runner()->SetPlacementFingerprint(PlacementFingerprint(placement));
    PS_ASSIGN_OR_RETURN(trainer_,
                        PsTrainer::Create(model(), task->ps_clients(), placement,
                                          ReplicaDropoutSeed(options.seed, 0, worker),
                                          EmbeddingTraffic::kRowSparse));
    // The ps tasks are asynchronous (the chief creates them so): no versions to send.
    trainer_->SetConsistency(absl::StrCat("worker ", worker), /*send_versions=*/false);
    ps_ = task->ps_clients();
    placement_ = std::move(placement);
    return absl::OkStatus();
  }

  absl::StatusOr<Gradients> ComputeGradients(const ReplicaContext& ctx,
                                             const ReplicaBatch& batch) override {
    if (ctx.replica_id_in_sync_group != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replica ", ctx.replica_id_in_sync_group, " does not run here (one per worker)"));
    }
    PS_ASSIGN_OR_RETURN(StepResult metrics, trainer_->ComputeGradients(batch.x, batch.y));
    Gradients g;
    g.values = std::move(trainer_->gradients());
    g.metrics = metrics;
    g.rows = batch.rows();
    g.global_batch_size = batch.global_batch_size;
    return g;
  }

  absl::Status ApplyGradients(const ReplicaContext& ctx, Gradients gradients) override {
    if (ctx.replica_id_in_sync_group != 0 || gradients.replica != 0) {
      return absl::InvalidArgumentError(absl::StrCat("replica ", ctx.replica_id_in_sync_group,
                                                     " was handed the gradients of replica ",
                                                     gradients.replica));
    }
    // Back into the trainer's buffers (reused by the next step), then to the ps.
    trainer_->gradients() = std::move(gradients.values);
    return trainer_->PushGradients();
  }

  // Every variable whole (model.get_weights), also a table the steps move by rows: through
  // a trainer of its own that pulls it whole, made at the first call.
  absl::StatusOr<std::vector<Tensor>> GetWeights() override {
    PsTrainer* whole = trainer_.get();
    if (trainer_->row_sparse()) {
      if (whole_ == nullptr) {
        PS_ASSIGN_OR_RETURN(whole_, PsTrainer::Create(model(), ps_, placement_, 0));
      }
      whole = whole_.get();
    }
    PS_RETURN_IF_ERROR(whole->PullAll());
    return whole->weights();
  }

 private:
  std::unique_ptr<PsTrainer> trainer_;
  // For GetWeights when trainer_ moves the table by rows (null until then): pulls only.
  std::unique_ptr<PsTrainer> whole_;
  std::vector<PsClient*> ps_;  // Not owned: the task's.
  std::vector<VariablePlacementEntry> placement_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterServerStrategy>> ParameterServerStrategy::Create(
    const StrategyOptions& options) {
  PS_ASSIGN_OR_RETURN(TfConfig config, ReadTfConfig(options));
  std::unique_ptr<ParameterServerStrategy> s(new ParameterServerStrategy());
  s->device_ = options.device;
  s->ps_recovery_timeout_ = options.ps_recovery_timeout;
  if (config.task.type == Role::kWorker) {
    std::string note;
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options.device, &note);
    if (!backend.ok()) {
      return absl::Status(backend.status().code(), absl::StrCat("device ", options.device, ": ",
                                                                backend.status().message()));
    }
    if (!note.empty()) LogInfo(note);
    s->first_backend_ = *std::move(backend);
  }
  PS_ASSIGN_OR_RETURN(s->task_, StartRoleTask(options, std::move(config)));
  return s;
}

absl::StatusOr<std::unique_ptr<DistributedModel>> ParameterServerStrategy::CreateModel(
    const ModelOptions& options) {
  const Role role = task_->role();
  if (role == Role::kPs) {
    return absl::FailedPreconditionError("a ps task holds variables and makes no model: call "
                                         "Strategy::JoinServer");
  }
  if (has_model_) {
    return absl::FailedPreconditionError(
        "parameter_server: one model per job (its variables keep the model's names on the ps)");
  }
  // The chief only evaluates: the CPU is enough for it.
  std::unique_ptr<Backend> backend =
      role == Role::kWorker ? std::move(first_backend_) : CreateCpuBackend();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildModel(options, backend.get()));
  std::unique_ptr<DistributedModel> out;
  if (ChiefTask* chief_task = task_->chief(); chief_task != nullptr) {
    auto chief = std::make_unique<ChiefModel>(std::move(backend), std::move(model), options.loss);
    PS_ASSIGN_OR_RETURN(variables_, chief->CreateVariables(chief_task, options));
    checkpoint_job_ = CheckpointJob(options);
    chief_task->set_recover_ps([this] { return RecoverPs(); });
    out = std::move(chief);
  } else {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> eval_model, BuildModel(options, backend.get()));
    auto worker = std::make_unique<WorkerModel>(std::move(backend), std::move(model),
                                                std::move(eval_model), options.loss);
    PS_RETURN_IF_ERROR(worker->Connect(task_->worker(), options));
    out = std::move(worker);
  }
  has_model_ = true;
  return out;
}

void ParameterServerStrategy::LeaveTasksRunning() {
  if (ChiefTask* chief = task_->chief(); chief != nullptr) chief->LeaveTasksRunning();
}

absl::Status ParameterServerStrategy::JoinServer() {
  if (task_->role() != Role::kPs) return Strategy::JoinServer();
  return task_->Serve();
}

absl::Status ParameterServerStrategy::RunReplicas(
    const std::function<absl::Status(const ReplicaContext&)>& fn, const DistributedBatch& batch) {
  if (task_->role() != Role::kWorker) {
    return absl::FailedPreconditionError(kRunOnWorkers);
  }
  PS_RETURN_IF_ERROR(CheckBatch(batch));
  return fn(ReplicaContext());
}

absl::Status ParameterServerStrategy::CheckChiefWithVariables(const char* what) const {
  if (task_->role() != Role::kChief) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the parameter_server chief saves and restores the variables; this is ",
        TaskIdToString(task_->config().task)));
  }
  if (variables_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": no variables yet (call Strategy::CreateModel first)"));
  }
  return absl::OkStatus();
}

Checkpointer* ParameterServerStrategy::CheckpointerFor(const std::string& dir) {
  if (checkpointer_ == nullptr || checkpointer_->dir() != dir) {
    Checkpointer::Options options;
    options.dir = dir;
    checkpointer_ = std::make_unique<Checkpointer>(options, &checkpoint_job_, variables_.get());
  }
  return checkpointer_.get();
}

absl::StatusOr<std::string> ParameterServerStrategy::Save(const std::string& dir,
                                                          const TrainingProgress& progress) {
  PS_RETURN_IF_ERROR(CheckChiefWithVariables("Strategy::Save"));
  if (dir.empty()) return absl::InvalidArgumentError("Strategy::Save: no folder given");
  absl::MutexLock lock(&checkpoint_mu_);
  Checkpointer* checkpointer = CheckpointerFor(dir);
  // A ps that failed is recovered (this very lock held) and the read done again.
  absl::Status written = checkpointer->Write(progress.epochs_done, progress.global_step, nullptr);
  if (!written.ok() && PsRecovery::IsPsGone(written)) {
    LogWarning(absl::StrCat("a ps failed: ", written.message(), "; recovering it"));
    PS_RETURN_IF_ERROR(RecoverPsLocked());
    written = checkpointer->Write(progress.epochs_done, progress.global_step, nullptr);
  }
  PS_RETURN_IF_ERROR(written);
  return checkpointer->last().path();
}

absl::StatusOr<TrainingProgress> ParameterServerStrategy::Restore(const std::string& dir) {
  PS_RETURN_IF_ERROR(CheckChiefWithVariables("Strategy::Restore"));
  if (dir.empty()) return absl::InvalidArgumentError("Strategy::Restore: no folder given");
  absl::MutexLock lock(&checkpoint_mu_);
  Checkpointer* checkpointer = CheckpointerFor(dir);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> checkpoint, checkpointer->OpenLatest());
  PS_RETURN_IF_ERROR(checkpointer->Restore(*checkpoint));
  // The triggers and IsCurrent count from the restored step.
  checkpointer->Start(checkpoint->step());
  TrainingProgress progress;
  progress.epochs_done = checkpoint->epoch();
  progress.global_step = checkpoint->step();
  LogInfo(absl::StrCat("restored the variables from checkpoint ", checkpoint->path(), " (epoch ",
                       progress.epochs_done, ", step ", progress.global_step, ")"));
  restored_ = std::move(checkpoint);
  return progress;
}

absl::Status ParameterServerStrategy::RecoverPs() {
  PS_RETURN_IF_ERROR(CheckChiefWithVariables("RecoverPs"));
  LogWarning("a function failed on a ps: training paused until every ps answers");
  absl::MutexLock lock(&checkpoint_mu_);
  return RecoverPsLocked();
}

absl::Status ParameterServerStrategy::RecoverPsLocked() {
  PsRecovery::Options options;
  options.timeout = ps_recovery_timeout_;
  options.seed = checkpoint_job_.seed;
  // A preemption (pstrain/preemption.h) while the ps is awaited ends the wait: the loop
  // then exits for its restart instead of holding the signal for up to the timeout.
  options.wait = [](absl::Duration timeout) -> absl::Status {
    const absl::Time until = absl::Now() + timeout;
    while (absl::Now() < until) {
      if (const char* signal = PreemptionWatcher::Preempted(); signal != nullptr) {
        return absl::AbortedError(absl::StrCat(signal, ": preempted while a failed ps was awaited"));
      }
      absl::SleepFor(std::min(absl::Milliseconds(50), until - absl::Now()));
    }
    return absl::OkStatus();
  };
  PsRecovery recovery(options, variables_.get(), checkpointer_.get(), restored_.get());
  return recovery.Recover("training continues");
}

}  // namespace pstrain::distribute::internal
