#include "chief/chief_task.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chief/chief_monitoring.h"
#include "chief/coordinator.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/keras_export.h"
#include "chief/membership.h"
#include "chief/rpc/chief_service.h"
#include "common/data/data_spec.h"
#include "common/logging.h"
#include "nlohmann/json.hpp"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "common/parallel.h"
#include "common/rpc/grpc_util.h"
#include "common/status_macros.h"
#include "common/training/consistency_config.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "worker/rpc/grpc_worker_client.h"

namespace pstrain {
namespace {

// The job file's folder as an absolute path: workers may run from another directory.
std::string DirectoryOf(const std::string& path) {
  char resolved[PATH_MAX];
  std::string absolute = realpath(path.c_str(), resolved) != nullptr ? resolved : path;
  const size_t slash = absolute.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : absolute.substr(0, slash);
}

absl::StatusOr<JobSpec> LoadJob(const ChiefOptions& options) {
  if (options.job_path.empty()) return absl::InvalidArgumentError("--job is required");
  std::ifstream file(options.job_path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read job spec ", options.job_path));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<JobSpec> job = ParseJobSpec(text.str(), DirectoryOf(options.job_path));
  if (!job.ok()) {
    return absl::Status(job.status().code(),
                        absl::StrCat(options.job_path, ": ", job.status().message()));
  }
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

}  // namespace

int RunChiefTask(const ChiefOptions& options, ShutdownSignal* shutdown, std::ostream& out) {
  const ClusterSpec& cluster = options.daemon.config.cluster;
  absl::StatusOr<JobSpec> job = LoadJob(options);
  if (!job.ok()) {
    LogError(job.status().message());
    return 2;
  }
  if (!options.export_keras.empty() && !absl::EndsWith(options.export_keras, ".keras")) {
    LogError(absl::StrCat("--export_keras=", options.export_keras,
                          " does not end in .keras (Keras loads only those)"));
    return 2;
  }
  // The job's consistency for this cluster (replicas_to_aggregate defaults to every
  // worker), checked before any task is waited for, as the rest of the job spec is.
  absl::StatusOr<ConsistencyConfig> consistency =
      ResolveConsistency(job->consistency, cluster.num_tasks("worker"));
  if (!consistency.ok()) {
    LogError(absl::StrCat(options.job_path, ": ", consistency.status().message()));
    return 2;
  }
  // A push that waits at the ps (bounded staleness, sync) must give up before its RPC's
  // deadline, or the worker takes the wait for a dead ps. Tasks share --rpc_timeout.
  if (consistency->mode() != CONSISTENCY_ASYNC &&
      absl::Milliseconds(consistency->timeout_ms()) >= options.daemon.rpc_timeout) {
    LogError(absl::StrCat(options.job_path, ": consistency timeout_ms (",
                          consistency->timeout_ms(), ") must be shorter than --rpc_timeout (",
                          absl::FormatDuration(options.daemon.rpc_timeout), ")"));
    return 2;
  }
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(job->model, backend.get());
  absl::Status loss_set = model.ok() ? (*model)->SetLoss(job->loss) : model.status();
  if (!loss_set.ok()) {
    LogError(absl::StrCat(options.job_path, ": ", loss_set.message()));
    return 2;
  }
  std::unique_ptr<Dataset> validation;
  if (job->data.is_object() && job->data.contains("validation")) {
    absl::StatusOr<Dataset> loaded =
        LoadJobDataset(job->data["validation"], DirectoryOf(options.job_path), "data.validation",
                       job->one_hot_labels);
    if (!loaded.ok()) {
      LogError(absl::StrCat(options.job_path, ": ", loaded.status().message()));
      return 2;
    }
    validation = std::make_unique<Dataset>(*std::move(loaded));
  }
  if (options.keep_checkpoints < 1) {
    LogError("--keep_checkpoints must be at least 1");
    return 2;
  }
  // Before any task is waited for: a directory the chief cannot write would otherwise
  // cost the first epoch.
  if (!options.checkpoint_dir.empty()) {
    if (absl::Status writable = CheckpointWriter(options.checkpoint_dir, {}).CheckWritable();
        !writable.ok()) {
      LogError(writable.message());
      return 2;
    }
  }
  // The checkpoint to continue from is opened (and verified) before any task is waited
  // for, so a bad --restore fails at start.
  std::unique_ptr<CheckpointReader> restore;
  if (options.restore == "latest") {
    if (!options.checkpoint_dir.empty()) {
      absl::StatusOr<std::unique_ptr<CheckpointReader>> found =
          CheckpointReader::Open(options.checkpoint_dir);
      if (found.ok()) {
        restore = *std::move(found);
      } else if (found.status().code() == absl::StatusCode::kNotFound) {
        LogInfo(absl::StrCat("no checkpoint in ", options.checkpoint_dir,
                             "; starting from freshly initialized variables"));
      } else {
        LogError(absl::StrCat("cannot restore: ", found.status().message()));
        return 1;
      }
    }
  } else if (options.restore != "none" && !options.restore.empty()) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> opened =
        CheckpointReader::Open(options.restore);
    if (!opened.ok()) {
      LogError(absl::StrCat("--restore=", options.restore, ": ", opened.status().message()));
      return 2;
    }
    restore = *std::move(opened);
  }
  if (cluster.num_tasks("ps") == 0 || cluster.num_tasks("worker") == 0) {
    LogError("parameter-server training needs at least one ps and one worker task");
    return 2;
  }
  absl::StatusOr<std::string> listen = ResolveListenAddress(options.daemon);
  if (!listen.ok()) {
    LogError(listen.status().message());
    return 1;
  }

  Membership membership(cluster);
  std::unique_ptr<Coordinator> coordinator;
  absl::Mutex coordinator_mu;
  ChiefServiceImpl service(
      &membership, SerializeJobSpec(*job), DirectoryOf(options.job_path),
      [&](ChiefStatusResponse* response) {
        absl::MutexLock lock(&coordinator_mu);
        if (coordinator != nullptr) coordinator->Describe(response);
      },
      [&](absl::Duration wait) -> absl::StatusOr<SaveCheckpointResponse> {
        Coordinator* running = nullptr;
        {
          absl::MutexLock lock(&coordinator_mu);
          running = coordinator.get();
        }
        if (running == nullptr) {
          return absl::FailedPreconditionError("training has not started: waiting for tasks");
        }
        // The coordinator lives until the server is shut down, after Run returns.
        return running->SaveCheckpointNow(wait);
      });
  // Metrics, dashboard, TensorBoard files and the progress bar; before the gRPC server,
  // so a metrics port or --logdir that cannot be used fails the chief at once.
  absl::StatusOr<std::unique_ptr<ChiefMonitoring>> monitoring = ChiefMonitoring::Start(
      *job, cluster.num_tasks("worker"), &membership, [&](ChiefStatusResponse* response) {
        absl::MutexLock lock(&coordinator_mu);
        if (coordinator != nullptr) coordinator->Describe(response);
      });
  if (!monitoring.ok()) {
    LogError(monitoring.status().message());
    return absl::IsInvalidArgument(monitoring.status()) ? 2 : 1;
  }
  absl::StatusOr<RunningServer> server = StartServer({*listen, {&service}});
  if (!server.ok()) {
    LogError(server.status().message());
    return 1;
  }
  LogInfo(absl::StrCat("chief serving on port ", server->port, "; waiting for ",
                       cluster.num_tasks("ps"), " ps and ", cluster.num_tasks("worker"),
                       " worker tasks"));

  std::vector<std::unique_ptr<PsClient>> ps_clients;
  std::vector<PsClient*> ps;
  for (int i = 0; i < cluster.num_tasks("ps"); ++i) {
    ps_clients.push_back(CreateGrpcPsClient(i, cluster.tasks("ps")[i], options.daemon.rpc_timeout));
    ps.push_back(ps_clients.back().get());
  }
  std::vector<std::unique_ptr<WorkerClient>> worker_clients;
  std::vector<WorkerClient*> workers;
  for (int i = 0; i < cluster.num_tasks("worker"); ++i) {
    worker_clients.push_back(CreateGrpcWorkerClient(i, cluster.tasks("worker")[i],
                                                    options.daemon.rpc_timeout,
                                                    options.run_steps_timeout));
    workers.push_back(worker_clients.back().get());
  }

  Coordinator::Options coordinator_options;
  coordinator_options.register_timeout = options.daemon.register_timeout;
  coordinator_options.steps_per_call = options.steps_per_call;
  coordinator_options.ps_addresses = cluster.tasks("ps");
  coordinator_options.placement_policy = job->placement;
  coordinator_options.consistency = *consistency;
  coordinator_options.checkpoint_dir = options.checkpoint_dir;
  coordinator_options.keep_checkpoints = options.keep_checkpoints;
  coordinator_options.checkpoint_every_steps = options.checkpoint_every_steps;
  coordinator_options.checkpoint_every = options.checkpoint_every;
  coordinator_options.checkpoint_every_epoch = options.checkpoint_every_epoch;
  coordinator_options.consistent_checkpoints = options.consistent_checkpoints;
  coordinator_options.checkpoint_commit_delay = options.checkpoint_commit_delay;
  coordinator_options.ps_recovery_timeout = options.ps_recovery_timeout;
  coordinator_options.observer = (*monitoring)->observer();
  // evaluate resolves the job's relative data paths against this folder.
  coordinator_options.checkpoint_metadata = {{"job_dir", DirectoryOf(options.job_path)}};
  {
    absl::MutexLock lock(&coordinator_mu);
    coordinator = std::make_unique<Coordinator>(
        coordinator_options, &*job, model->get(), &membership, ps, workers, validation.get(),
        shutdown, [&out, &monitoring](const EpochSummary& summary) {
          // The observers first: the progress bar clears its line for the epoch line.
          (*monitoring)->observer()->OnEpoch(summary);
          out << FormatEpochLine(summary) << std::endl;
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
                        absl::StrCat("epoch ", summary.epoch, ": ", summary.samples,
                                     " samples in ", absl::FormatDuration(summary.elapsed)),
                        fields);
        },
        restore.get());
  }
  // fit.batch_size is each worker's batch, as in Keras's ParameterServerStrategy.
  out << "pstrain: parameter_server strategy, "
      << DescribePerWorkerBatch(job->batch_size, cluster.num_tasks("worker")) << std::endl;
  absl::Status result = coordinator->Run();
  if (result.ok() && !options.export_keras.empty()) {
    // The ps tasks still serve: the final weights are theirs.
    absl::StatusOr<std::vector<Tensor>> weights = coordinator->PullWeights();
    result = weights.ok() ? ExportKerasModel(*job, *weights, options.export_keras)
                          : weights.status();
    if (result.ok()) {
      LogInfo(absl::StrCat("wrote the trained model to ", options.export_keras));
    } else {
      result = absl::Status(result.code(), absl::StrCat("--export_keras: ", result.message()));
    }
  }
  int exit_code = 0;
  if (result.ok()) {
    LogInfo("training finished; shutting down every task");
  } else {
    LogError(absl::StrCat("job failed: ", result.message()));
    exit_code = 1;
  }
  membership.EndJob();
  ShutdownTasks(ps, workers, result.ok() ? "job finished" : "job failed");
  SetServing(server->server.get(), false);
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  (*monitoring)->Finish();
  return exit_code;
}

}  // namespace pstrain
