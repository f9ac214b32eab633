#include "chief/chief_task.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "chief/chief_monitoring.h"
#include "chief/coordinator.h"
#include "chief/membership.h"
#include "chief/rpc/chief_service.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/keras_export.h"
#include "common/daemon/exit_codes.h"
#include "common/data/data_spec.h"
#include "common/logging.h"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "common/memory_budget.h"
#include "common/model/model_memory.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "common/training/consistency_config.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "ps_server/client/sparse_embedding.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "worker/rpc/grpc_worker_client.h"

namespace pstrain {
namespace {

// How long a task's heartbeats may be missing before the chief's membership counts it
// lost: five of the default --heartbeat_interval.
constexpr absl::Duration kTaskLostAfter = absl::Seconds(5);

// The job file's folder as an absolute path: workers may run from another directory.
std::string DirectoryOf(const std::string& path) {
  char resolved[PATH_MAX];
  std::string absolute = realpath(path.c_str(), resolved) != nullptr ? resolved : path;
  const size_t slash = absolute.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : absolute.substr(0, slash);
}

// `status` as INVALID_ARGUMENT prefixed with the job file: whatever went wrong reading the
// job spec, it is the configuration's fault.
absl::Status InJobSpec(const ChiefOptions& options, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(options.job_path, ": ", status.message()));
}

absl::StatusOr<JobSpec> LoadJob(const ChiefOptions& options) {
  if (options.job_path.empty()) return absl::InvalidArgumentError("--job is required");
  std::ifstream file(options.job_path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read job spec ", options.job_path));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<JobSpec> job = ParseJobSpec(text.str(), DirectoryOf(options.job_path),
                                              {/*read_initial_weights=*/false});
  if (!job.ok()) return InJobSpec(options, job.status());
  if (options.epochs_override > 0) job->epochs = options.epochs_override;
  // Flags win over the file; the job's other consistency settings (timeout_ms, ...) stay.
  if (!options.consistency_override.empty()) {
    absl::StatusOr<ConsistencyMode> mode = ParseConsistencyMode(options.consistency_override);
    if (!mode.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--consistency: ", mode.status().message()));
    }
    job->consistency.set_mode(*mode);
  }
  if (options.staleness_override >= 0) job->consistency.set_staleness(options.staleness_override);
  return job;
}

// What the chief knows before any task registers. Everything that can be wrong in the job
// spec or the flags is found while building it, so a typo fails the chief at start rather
// than after every task has registered.
struct ChiefJob {
  JobSpec job;
  ConsistencyConfig consistency;  // the job's, resolved for this cluster
  std::unique_ptr<Backend> backend;  // the model's, for evaluation
  std::unique_ptr<Model> model;
  std::unique_ptr<Dataset> validation;        // null without validation data
  std::unique_ptr<CheckpointReader> restore;  // null: start from fresh variables
};

// The job's consistency for this cluster (replicas_to_aggregate defaults to every worker),
// checked as the rest of the job spec is.
absl::Status ResolveJobConsistency(const ChiefOptions& options, const DaemonOptions& daemon,
                                   ChiefJob* chief) {
  absl::StatusOr<ConsistencyConfig> consistency =
      ResolveConsistency(chief->job.consistency, daemon.config.cluster.num_tasks(Role::kWorker));
  if (!consistency.ok()) return InJobSpec(options, consistency.status());
  // A push that waits at the ps (bounded staleness, sync) must give up before its RPC's
  // deadline, or the worker takes the wait for a dead ps. Tasks share --rpc_timeout.
  if (consistency->mode() != CONSISTENCY_ASYNC &&
      absl::Milliseconds(consistency->timeout_ms()) >= daemon.rpc_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.job_path, ": consistency timeout_ms (", consistency->timeout_ms(),
        ") must be shorter than --rpc_timeout (", absl::FormatDuration(daemon.rpc_timeout),
        ")"));
  }
  chief->consistency = *consistency;
  return absl::OkStatus();
}

// Whether what the chief holds fits --max_memory (common/model/model_memory.h). It
// evaluates as a worker trains (ps_server/client/sharded_evaluator.h): every dense
// variable pulled once, of an Embedding table only a validation batch's rows, and a
// validation batch's activations. The whole model only where something needs it whole:
// --export_keras's final weights. (A .keras model's weights are read by each ps, its own
// rows, and otherwise each ps draws its rows: ShardedVariables. Only a ps that cannot
// reach the .keras file makes the chief read it whole, which is not counted here: the
// log says so.) The ps tasks write checkpoints (format 2); a
// checkpoint the chief must read whole (format 1: a ps without the folder) is checked
// when it is written (Checkpointer).
absl::Status CheckChiefMemory(const Model& model, const JobSpec& job, bool exports) {
  const bool given = job.initial_weights != nullptr;
  ModelMemoryUse use;
  use.copies_per_variable = 1 + (given ? 1 : 0) + (exports ? 1 : 0);
  use.copies_are = absl::StrCat(given ? "initial values, " : "",
                                exports ? "the weights for --export_keras, " : "",
                                "values pulled to evaluate");
  use.batch = Coordinator::kValidationBatch;
  if (!given && !exports && HasRowSparseEmbedding(model)) {
    use.first_layer_rows_held = SaturatingMul(Coordinator::kValidationBatch, model.input_size());
    use.copies_are += "; of the Embedding, a validation batch's rows";
  }
  return CheckModelMemory(model, use, "chief");
}

// The model (the variables' shapes and initial values, and evaluation) and the
// validation data.
absl::Status BuildModelAndValidation(const ChiefOptions& options, ChiefJob* chief) {
  chief->backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::FromKerasJson(chief->job.model, chief->backend.get());
  if (!model.ok()) return InJobSpec(options, model.status());
  if (absl::Status loss = (*model)->SetLoss(chief->job.loss); !loss.ok()) {
    return InJobSpec(options, loss);
  }
  // Before any task is waited for.
  if (absl::Status fits = CheckChiefMemory(**model, chief->job, !options.export_keras.empty());
      !fits.ok()) {
    return absl::Status(fits.code(), absl::StrCat(options.job_path, ": ", fits.message()));
  }
  chief->model = *std::move(model);
  const nlohmann::json& data = chief->job.data;
  if (data.is_object() && data.contains("validation")) {
    absl::StatusOr<Dataset> loaded =
        LoadJobDataset(data["validation"], DirectoryOf(options.job_path), "data.validation",
                       chief->job.one_hot_labels);
    if (!loaded.ok()) return InJobSpec(options, loaded.status());
    chief->validation = std::make_unique<Dataset>(*std::move(loaded));
  }
  return absl::OkStatus();
}

// The checkpoint to continue from (null: start fresh), opened and verified now so that a
// bad --restore fails at start. Errors: INVALID_ARGUMENT a --restore PATH that does not
// verify, checkpoint.keep < 1; FAILED_PRECONDITION --restore=latest finds checkpoints of
// which none verifies.
absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenCheckpointToRestore(
    const ChiefOptions& options) {
  if (options.checkpoint.keep < 1) {
    return absl::InvalidArgumentError("--keep_checkpoints must be at least 1");
  }
  // Before any task is waited for: a directory the chief cannot write would otherwise
  // cost the first epoch.
  if (!options.checkpoint.dir.empty()) {
    if (absl::Status writable = CheckpointWriter(options.checkpoint.dir, {}).CheckWritable();
        !writable.ok()) {
      return absl::InvalidArgumentError(writable.message());
    }
  }
  if (options.restore == "none" || options.restore.empty()) return nullptr;
  if (options.restore != "latest") {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> opened =
        CheckpointReader::Open(options.restore);
    if (!opened.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--restore=", options.restore, ": ", opened.status().message()));
    }
    return opened;
  }
  if (options.checkpoint.dir.empty()) return nullptr;
  // A sharded checkpoint here is restored by the ps tasks, each reading its own rows: the
  // chief reads only its manifest.
  CheckpointReader::OpenOptions open;
  open.load_sharded_tensors = false;
  absl::StatusOr<std::unique_ptr<CheckpointReader>> found =
      CheckpointReader::Open(options.checkpoint.dir, open);
  if (found.ok()) return found;
  if (absl::IsNotFound(found.status())) {
    LogInfo(absl::StrCat("no checkpoint in ", options.checkpoint.dir,
                         "; starting from freshly initialized variables"));
    return nullptr;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot restore: ", found.status().message()));
}

absl::StatusOr<ChiefJob> PrepareJob(const ChiefOptions& options, const DaemonOptions& daemon) {
  ChiefJob chief;
  PS_ASSIGN_OR_RETURN(chief.job, LoadJob(options));
  if (!options.export_keras.empty()) {
    PS_RETURN_IF_ERROR(CheckKerasPath(options.export_keras, "--export_keras="));
  }
  PS_RETURN_IF_ERROR(ResolveJobConsistency(options, daemon, &chief));
  PS_RETURN_IF_ERROR(BuildModelAndValidation(options, &chief));
  PS_ASSIGN_OR_RETURN(chief.restore, OpenCheckpointToRestore(options));
  const ClusterSpec& cluster = daemon.config.cluster;
  if (cluster.num_tasks(Role::kPs) == 0 || cluster.num_tasks(Role::kWorker) == 0) {
    return absl::InvalidArgumentError(
        "parameter-server training needs at least one ps and one worker task");
  }
  return chief;
}

// gRPC clients of every ps and worker task, in task order.
struct TaskClients {
  std::vector<std::unique_ptr<PsClient>> owned_ps;
  std::vector<std::unique_ptr<WorkerClient>> owned_workers;
  std::vector<PsClient*> ps;
  std::vector<WorkerClient*> workers;
};

TaskClients ConnectToTasks(const ChiefOptions& options, const DaemonOptions& daemon) {
  const ClusterSpec& cluster = daemon.config.cluster;
  TaskClients clients;
  for (int i = 0; i < cluster.num_tasks(Role::kPs); ++i) {
    clients.owned_ps.push_back(CreateGrpcPsClient(i, cluster.tasks(Role::kPs)[i], daemon.rpc_timeout));
    clients.ps.push_back(clients.owned_ps.back().get());
  }
  for (int i = 0; i < cluster.num_tasks(Role::kWorker); ++i) {
    clients.owned_workers.push_back(CreateGrpcWorkerClient(
        i, cluster.tasks(Role::kWorker)[i], daemon.rpc_timeout, options.run_steps_timeout));
    clients.workers.push_back(clients.owned_workers.back().get());
  }
  return clients;
}

Coordinator::Options CoordinatorOptionsFor(const ChiefOptions& options,
                                           const DaemonOptions& daemon, const ChiefJob& chief) {
  Coordinator::Options o;
  o.register_timeout = daemon.register_timeout;
  o.steps_per_call = options.steps_per_call;
  o.ps_addresses = daemon.config.cluster.tasks(Role::kPs);
  o.placement_policy = chief.job.placement;
  o.consistency = chief.consistency;
  o.checkpoint = options.checkpoint;
  // evaluate resolves the job's relative data paths against this folder.
  *o.checkpoint.metadata = {{"job_dir", DirectoryOf(options.job_path)}};
  o.checkpoint_every_epoch = options.checkpoint_every_epoch;
  o.consistent_checkpoints = options.consistent_checkpoints;
  o.ps_recovery_timeout = options.ps_recovery_timeout;
  return o;
}

// The coordinator as the threads outside RunChiefTask reach it: the Chief service's
// GetStatus and SaveCheckpoint, and the signal thread. Empty until training is about to
// start and again once it is over. Thread-safe; shared, because the signal handler may
// outlive RunChiefTask's frame by a moment.
class CoordinatorHandle {
 public:
  void Set(Coordinator* coordinator) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    coordinator_ = coordinator;
  }

  void Describe(ChiefStatusResponse* response) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (coordinator_ != nullptr) {
      coordinator_->Describe(response);
    } else if (finished_.has_value()) {
      response->MergeFrom(*finished_);
    }
  }

  // The coordinator is about to go: forgets it, keeping what it last described, so the
  // dashboard still shows the finished job's phase, step and layout while the chief
  // lingers (--metrics_linger).
  void Finish() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (coordinator_ == nullptr) return;
    finished_.emplace();
    coordinator_->Describe(&*finished_);
    coordinator_ = nullptr;
  }

  absl::StatusOr<SaveCheckpointResponse> SaveCheckpointNow(absl::Duration wait)
      ABSL_LOCKS_EXCLUDED(mu_) {
    Coordinator* running = nullptr;
    {
      absl::MutexLock lock(&mu_);
      running = coordinator_;
    }
    if (running == nullptr) {
      return absl::FailedPreconditionError("training has not started: waiting for tasks");
    }
    // Not under the lock (the wait is long): the coordinator lives until the server has
    // stopped, so until this call has returned.
    return running->SaveCheckpointNow(wait);
  }

  // Coordinator::Preempt; false when there is no coordinator (yet, or any more).
  bool Preempt() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return coordinator_ != nullptr && coordinator_->Preempt();
  }

 private:
  absl::Mutex mu_;
  Coordinator* coordinator_ ABSL_GUARDED_BY(mu_) = nullptr;  // Not owned.
  std::optional<ChiefStatusResponse> finished_ ABSL_GUARDED_BY(mu_);
};

// What SIGTERM/SIGINT does to the chief: during training, preemption (checkpoint, then
// exit 42 for a restart); before it, while waiting for tasks, a clean stop (exit 0).
DaemonRuntime::SignalHandler ChiefSignalHandler(std::shared_ptr<CoordinatorHandle> handle,
                                                ShutdownSignal* shutdown) {
  return [handle, shutdown](const std::string& signal_name) {
    if (handle->Preempt()) {
      LogWarning(absl::StrCat(signal_name, " during training: handing out no more work; "
                              "the chunks in flight finish, a checkpoint is written, then "
                              "the chief exits ", kExitPreempted, " to be restarted"));
      return static_cast<int>(kExitPreempted);
    }
    shutdown->Request(kExitOk, absl::StrCat(signal_name, " before training started"));
    return static_cast<int>(kExitOk);
  };
}

// The epoch's figures as a log record with structured fields (JSON lines with
// --log_format=json).
void LogEpoch(const EpochSummary& summary) {
  nlohmann::json fields = {{"epoch", summary.epoch},
                           {"steps", summary.steps},
                           {"samples", summary.samples},
                           {"seconds", absl::ToDoubleSeconds(summary.elapsed)},
                           {"loss", summary.loss},
                           {"accuracy", summary.accuracy}};
  if (summary.has_validation) {
    fields["val_loss"] = summary.val_loss;
    fields["val_accuracy"] = summary.val_accuracy;
  }
  LogWithFields('I',
                absl::StrCat("epoch ", summary.epoch, ": ", summary.samples, " samples in ",
                             absl::FormatDuration(summary.elapsed)),
                fields);
}

// Tells every task the job is over. Best effort: a task that does not answer still
// learns it from its next heartbeat, or exits when the chief is gone.
void ShutdownTasks(const std::vector<PsClient*>& ps, const std::vector<WorkerClient*>& workers,
                   const std::string& reason) {
  std::vector<std::function<absl::Status()>> calls;
  for (WorkerClient* w : workers) calls.push_back([w, &reason] { return w->Shutdown(reason); });
  for (PsClient* p : ps) calls.push_back([p, &reason] { return p->Shutdown(reason); });
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::function<absl::Status()> call = calls[i];
    calls[i] = [call] {
      absl::Status s = call();
      if (!s.ok()) LogInfo(absl::StrCat("shutdown not delivered: ", s.message()));
      return absl::OkStatus();
    };
  }
  (void)RunConcurrently(calls);
}

// Ends the job after Coordinator::Run returned `result`, and says how the chief exits.
// Preempted: the tasks keep running for the restarted chief. Otherwise every task is told
// the job is over.
// What GetStatus would answer now, as one line of protobuf's JSON (as each ps logs its
// own): once the chief is gone, what every task held at most (the chief's peak after its
// last evaluation, each task's as its last heartbeat said) stays readable in the log.
void LogFinalStatus(const ChiefServiceImpl& service) {
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(service.Status(), &json, print).ok()) return;
  LogInfo(absl::StrCat("chief final status: ", json));
}

int FinishJob(const absl::Status& result, bool preempted, Membership* membership,
              const TaskClients& tasks, ShutdownSignal* shutdown) {
  if (absl::IsAborted(result) && preempted) {
    LogWarning(absl::StrCat("stopped for a restart: ", result.message(), "; exiting with code ",
                            kExitPreempted, " (the ps and workers wait for the restarted "
                            "chief, which resumes from the newest checkpoint)"));
    return kExitPreempted;
  }
  int exit_code = kExitOk;
  if (result.ok()) {
    LogInfo("training finished; shutting down every task");
  } else if (absl::IsCancelled(result) && shutdown->requested()) {
    exit_code = shutdown->exit_code();
    LogInfo(absl::StrCat("stopped (", shutdown->reason(), "); shutting down every task"));
  } else {
    LogError(absl::StrCat("job failed: ", result.message()));
    exit_code = kExitFailure;
  }
  membership->EndJob();
  ShutdownTasks(tasks.ps, tasks.workers, result.ok() ? "job finished" : "job failed");
  return exit_code;
}

}  // namespace

int RunChiefTask(const ChiefOptions& options, DaemonRuntime* runtime, std::ostream& out) {
  const DaemonOptions& daemon = runtime->options();
  absl::StatusOr<ChiefJob> chief = PrepareJob(options, daemon);
  if (!chief.ok()) {
    LogError(chief.status().message());
    return ExitCodeFor(chief.status());
  }
  const ClusterSpec& cluster = daemon.config.cluster;
  // A task is lost once its heartbeats (every --heartbeat_interval, 1 s by default) have
  // been missing for kTaskLostAfter (the dashboard shows it so).
  Membership membership(cluster, ChiefMembershipOptions(kTaskLostAfter));
  auto handle = std::make_shared<CoordinatorHandle>();
  ChiefServiceImpl service(
      &membership, SerializeJobSpec(chief->job), DirectoryOf(options.job_path),
      [handle](ChiefStatusResponse* response) { handle->Describe(response); },
      [handle](absl::Duration wait) { return handle->SaveCheckpointNow(wait); });
  // Metrics, dashboard, TensorBoard files and the progress bar; before the gRPC server,
  // so a metrics port or --logdir that cannot be used fails the chief at once.
  absl::StatusOr<std::unique_ptr<ChiefMonitoring>> monitoring = ChiefMonitoring::Start(
      runtime->metrics(), chief->job, cluster.num_tasks(Role::kWorker), &membership,
      [handle](ChiefStatusResponse* response) { handle->Describe(response); });
  if (!monitoring.ok()) {
    LogError(monitoring.status().message());
    return ExitCodeFor(monitoring.status());
  }
  if (absl::Status served = runtime->Serve({&service}); !served.ok()) {
    LogError(served.message());
    return ExitCodeFor(served);
  }
  LogInfo(absl::StrCat("waiting for ", cluster.num_tasks(Role::kPs), " ps and ",
                       cluster.num_tasks(Role::kWorker), " worker tasks"));
  runtime->SetSignalHandler(ChiefSignalHandler(handle, runtime->shutdown()));

  TaskClients tasks = ConnectToTasks(options, daemon);
  Coordinator::Options coordinator_options = CoordinatorOptionsFor(options, daemon, *chief);
  TrainingObserver* observer = (*monitoring)->observer();
  coordinator_options.observer = observer;
  Coordinator coordinator(
      coordinator_options, &chief->job, chief->model.get(), &membership, tasks.ps,
      tasks.workers, chief->validation.get(), runtime->shutdown(),
      [&out, observer](const EpochSummary& summary) {
        // The observers first: the progress bar clears its line for the epoch line.
        observer->OnEpoch(summary);
        out << FormatEpochLine(summary) << std::endl;
        LogEpoch(summary);
      },
      chief->restore.get());
  handle->Set(&coordinator);
  // fit.batch_size is each worker's batch, as in Keras's ParameterServerStrategy.
  out << "pstrain: parameter_server strategy, "
      << DescribePerWorkerBatch(chief->job.batch_size, cluster.num_tasks(Role::kWorker)) << std::endl;
  absl::Status result = coordinator.Run();
  if (result.ok() && !options.export_keras.empty()) {
    // The ps tasks still serve: the final weights are theirs.
    absl::StatusOr<std::vector<Tensor>> weights = coordinator.PullWeights();
    result = weights.ok() ? ExportKerasModel(chief->job, *weights, options.export_keras)
                          : weights.status();
    if (result.ok()) {
      LogInfo(absl::StrCat("wrote the trained model to ", options.export_keras));
    } else {
      result = absl::Status(result.code(), absl::StrCat("--export_keras: ", result.message()));
    }
  }
  const int exit_code =
      FinishJob(result, coordinator.preempted(), &membership, tasks, runtime->shutdown());
  LogFinalStatus(service);
  // The server goes first: its SaveCheckpoint calls may still use the coordinator.
  runtime->StopServing();
  handle->Finish();
  // A chief stopped for a restart leaves at once: its grace is for the checkpoint.
  if (exit_code != kExitPreempted) (*monitoring)->Finish();
  return exit_code;
}

}  // namespace pstrain
