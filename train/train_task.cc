#include "train/train_task.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/keras_export.h"
#include "common/daemon/exit_codes.h"
#include "common/logging.h"
#include "common/model/job_spec.h"
#include "common/rpc/grpc_util.h"
#include "common/status_macros.h"
#include "common/training/strategy_kind.h"
#include "common/training/training_state.h"
#include "distribute/allreduce/collective_selection.h"
#include "distribute/allreduce/ring_allreduce.h"
#include "distribute/create_sync_strategy.h"
#include "nlohmann/json.hpp"
#include "pstrain/fit.h"
#include "pstrain/strategy_from_setup.h"
#include "train/train_monitoring.h"

ABSL_FLAG(std::string, job, "", "Job spec (JSON) to train.");
ABSL_FLAG(int, epochs, 0, "Overrides fit.epochs when > 0.");
ABSL_FLAG(std::string, device, "cpu",
          "cpu, auto (CUDA when a device answers, else the CPU), cuda or cuda:N.");
ABSL_FLAG(std::string, strategy, "default", "default, mirrored or multi_worker_mirrored.");
ABSL_FLAG(std::string, devices, "",
          "mirrored: comma-separated cpu:N / cuda:N, one replica each (default: every GPU, "
          "else one CPU replica).");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Seconds(60),
          "multi_worker_mirrored: a worker that does not answer an all-reduce within this "
          "is declared dead, and named.");
ABSL_FLAG(absl::Duration, startup_timeout, absl::Seconds(120),
          "multi_worker_mirrored: how long the workers wait for each other at start.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Where a checkpoint is written at the end of every epoch (multi_worker_mirrored: "
          "by rank 0 only); empty = none.");
ABSL_FLAG(int, keep_checkpoints, 3, "Checkpoints kept in --checkpoint_dir.");
ABSL_FLAG(std::string, export_keras, "",
          "At the end of the job, write the trained model as a Keras 3 .keras file at this "
          "path (multi_worker_mirrored: by rank 0 only); empty = none.");
ABSL_FLAG(std::string, restore, "latest",
          "latest (the newest good checkpoint in --checkpoint_dir, else a fresh start), none, "
          "or the path of a checkpoint (or of a folder of them) to continue from. "
          "multi_worker_mirrored: read by rank 0 only and sent to the others.");
ABSL_FLAG(std::string, collective, "auto",
          "multi_worker_mirrored: auto (NCCL when every worker runs on a CUDA device in a CUDA "
          "build, else the gRPC ring), ring or nccl (an error when NCCL is not possible).");
ABSL_FLAG(int64_t, allreduce_bucket_bytes, pstrain::RingAllReduceOptions().bucket_bytes,
          "Fusion bucket of the ring all-reduce.");
ABSL_FLAG(int64_t, allreduce_chunk_bytes, pstrain::RingAllReduceOptions().chunk_bytes,
          "One message of the ring all-reduce.");

namespace pstrain {
namespace {

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// `status` as INVALID_ARGUMENT prefixed with `prefix`: the configuration's fault.
absl::Status BadConfiguration(absl::string_view prefix, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(prefix, status.message()));
}

// The job spec and its data, as the run trains them (a checkpoint stores the job as run).
struct TrainJob {
  std::string path;
  std::string base_dir;  // relative data paths in the job are relative to it
  JobSpec job;
  FitData data;
};

absl::StatusOr<TrainJob> LoadTrainJob() {
  TrainJob train;
  train.path = absl::GetFlag(FLAGS_job);
  if (train.path.empty()) return absl::InvalidArgumentError("--job=FILE is required");
  if (absl::GetFlag(FLAGS_epochs) < 0) return absl::InvalidArgumentError("--epochs must be >= 0");
  if (absl::GetFlag(FLAGS_keep_checkpoints) < 1) {
    return absl::InvalidArgumentError("--keep_checkpoints must be at least 1");
  }
  const std::string export_keras = absl::GetFlag(FLAGS_export_keras);
  if (!export_keras.empty()) PS_RETURN_IF_ERROR(CheckKerasPath(export_keras, "--export_keras="));
  std::ifstream in(train.path);
  if (!in) return absl::NotFoundError(absl::StrCat(train.path, ": cannot read the job spec"));
  std::stringstream text;
  text << in.rdbuf();
  train.base_dir = DirectoryOf(train.path);
  absl::StatusOr<JobSpec> job = ParseJobSpec(text.str(), train.base_dir);
  if (!job.ok()) return BadConfiguration(absl::StrCat(train.path, ": "), job.status());
  train.job = *std::move(job);
  if (absl::GetFlag(FLAGS_epochs) > 0) train.job.epochs = absl::GetFlag(FLAGS_epochs);
  absl::StatusOr<FitData> data = LoadFitData(train.job, train.base_dir);
  if (!data.ok()) return BadConfiguration(absl::StrCat(train.path, ": "), data.status());
  train.data = *std::move(data);
  return train;
}

// The strategy --strategy names, made by the one factory the library uses too
// (distribute/create_sync_strategy.h; for multi_worker_mirrored its ring serves the
// all-reduce through this daemon's server) and handed to Fit as the public Strategy
// (pstrain/strategy_from_setup.h), as a Keras script hands model.fit a tf.distribute one.
struct TrainStrategy {
  std::unique_ptr<distribute::Strategy> strategy;
  MultiWorkerRing* ring = nullptr;  // multi_worker_mirrored; owned by `strategy`
  bool serving = false;  // the all-reduce service runs: peers may be waiting in it
  bool prints = true;    // only rank 0 of a multi-worker job writes epoch lines
};

// The synchronous strategy --strategy names, said in one line with the job's batch
// (fit.batch_size: the global batch, as Keras reads it under these strategies).
absl::Status SetUpStrategy(DaemonRuntime* runtime, int batch_size, TrainStrategy* out) {
  PS_ASSIGN_OR_RETURN(const StrategyKind kind, ParseStrategyKind(absl::GetFlag(FLAGS_strategy)));
  if (kind == StrategyKind::kParameterServer) {
    return absl::InvalidArgumentError(
        "--strategy=parameter_server: train runs default, mirrored and multi_worker_mirrored; "
        "parameter_server runs as the chief, ps and worker daemons");
  }
  SyncStrategyOptions options;
  options.kind = kind;
  options.device = absl::GetFlag(FLAGS_device);
  options.devices = absl::GetFlag(FLAGS_devices);
  if (kind == StrategyKind::kMultiWorkerMirrored) {
    absl::StatusOr<CollectiveKind> collective =
        ParseCollectiveKind(absl::GetFlag(FLAGS_collective));
    if (!collective.ok()) return BadConfiguration("--collective: ", collective.status());
    options.collective = *collective;
    options.config = runtime->options().config;
    options.multi_worker.ring.timeout = absl::GetFlag(FLAGS_collective_timeout);
    options.multi_worker.ring.bucket_bytes = absl::GetFlag(FLAGS_allreduce_bucket_bytes);
    options.multi_worker.ring.chunk_bytes = absl::GetFlag(FLAGS_allreduce_chunk_bytes);
    options.multi_worker.startup_timeout = absl::GetFlag(FLAGS_startup_timeout);
    // On this task's port, beside health and reflection.
    options.serve = [runtime, out](grpc::Service* service,
                                   const std::string&) -> absl::StatusOr<RunningServer> {
      PS_RETURN_IF_ERROR(runtime->Serve({service}));
      out->serving = true;
      RunningServer served;  // the daemon's server, stopped by RunTrainTask
      served.port = runtime->port();
      return served;
    };
  }
  SyncStrategySetup setup;
  absl::Status created = CreateSyncStrategy(options, &setup);
  // Owned by the public strategy from here, also after a failure: the ring may already
  // serve on the daemon's server with peers waiting in it, and Fail exits before it is
  // destroyed.
  const std::vector<std::string> devices = setup.devices;  // mirrored's, as given
  out->ring = setup.ring.get();
  out->strategy = distribute::StrategyFromSetup(kind, std::move(setup), options.config.task);
  // The collective asked for cannot be had: the configuration's fault (exit 2).
  if (absl::IsFailedPrecondition(created)) return BadConfiguration("", created);
  PS_RETURN_IF_ERROR(created);
  const distribute::Strategy& strategy = *out->strategy;
  const int n = strategy.num_replicas_in_sync();
  std::string replicas;  // "(cpu:0, cpu:1)" / "(chief 0, worker 0)"
  if (kind == StrategyKind::kMirrored) {
    replicas = absl::StrCat(" (", absl::StrJoin(devices, ", "), ")");
  } else if (kind == StrategyKind::kMultiWorkerMirrored) {
    replicas = absl::StrCat(" (", absl::StrJoin(out->ring->options().names, ", "), ")");
    out->prints = out->ring->rank() == 0;
  }
  if (out->prints) {
    std::cout << "pstrain: " << strategy.name() << " strategy"
              << (kind == StrategyKind::kDefault ? std::string()
                                                 : absl::StrCat(", num_replicas_in_sync=", n))
              << replicas << ", " << DescribeGlobalBatch(batch_size, n) << std::endl;
  }
  return absl::OkStatus();
}

// The state to continue from, read by the process that keeps checkpoints (rank 0): none
// when --restore=none or DIR holds no checkpoint yet. Errors: INVALID_ARGUMENT a --restore
// PATH that does not verify; FAILED_PRECONDITION a checkpoint that cannot be used.
struct Restored {
  std::string path;  // empty: nothing restored here
  TrainingState state;
};

absl::StatusOr<Restored> ReadStateToRestore(const std::string& checkpoint_dir) {
  const std::string restore_flag = absl::GetFlag(FLAGS_restore);
  std::unique_ptr<CheckpointReader> reader;
  if (restore_flag == "latest") {
    if (checkpoint_dir.empty()) return Restored();
    // Opening the root picks the newest checkpoint that verifies; one that does not is
    // reported in one line and the one before it is used.
    absl::StatusOr<std::unique_ptr<CheckpointReader>> found = CheckpointReader::Open(checkpoint_dir);
    if (absl::IsNotFound(found.status())) {
      LogInfo(absl::StrCat("no checkpoint in ", checkpoint_dir,
                           "; starting from freshly initialized variables"));
      return Restored();
    }
    if (!found.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot restore: ", found.status().message()));
    }
    reader = *std::move(found);
  } else if (restore_flag != "none" && !restore_flag.empty()) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> opened = CheckpointReader::Open(restore_flag);
    if (!opened.ok()) {
      return BadConfiguration(absl::StrCat("--restore=", restore_flag, ": "), opened.status());
    }
    reader = *std::move(opened);
  } else {
    return Restored();
  }
  absl::StatusOr<TrainingState> state = TrainingStateFromCheckpoint(*reader);
  if (!state.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot restore: ", state.status().message()));
  }
  return Restored{reader->path(), *std::move(state)};
}

// The job's folder as an absolute path: evaluate resolves the job's relative data paths
// against it, from wherever it runs.
std::string AbsoluteJobDir(const std::string& base_dir) {
  if (!base_dir.empty() && base_dir[0] == '/') return base_dir;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return base_dir;
  return base_dir == "." ? std::string(cwd) : absl::StrCat(cwd, "/", base_dir);
}

// Fit's callbacks: the monitoring (metrics, dashboard, TensorBoard, the progress bar),
// the epoch lines, the restore line, the checkpoints and the stop on SIGTERM. Pointers are
// not owned and outlive Fit.
FitOptions MakeFitOptions(const TrainJob& train, TrainStrategy* ts, const Restored& restored,
                          CheckpointWriter* writer, TrainMonitoring* watch,
                          ShutdownSignal* shutdown) {
  FitOptions options;
  options.epochs = absl::GetFlag(FLAGS_epochs);
  const bool prints = ts->prints;
  options.on_batch = [watch](const BatchProgress& p) { watch->OnBatch(p); };
  // A signal stops training once the epoch in progress is done (and checkpointed).
  options.on_epoch = [watch, prints, shutdown](const EpochSummary& s) {
    // The observers first: the progress bar clears its line for the epoch line.
    watch->observer()->OnEpoch(s);
    if (prints) std::cout << FormatEpochLine(s) << std::endl;
    return !shutdown->requested();
  };
  if (!restored.path.empty()) options.restore = &restored.state;
  const int epochs = train.job.epochs;
  const std::string what = restored.path.empty() ? "rank 0's checkpoint" : restored.path;
  options.on_restored = [what, epochs](int epochs_done, int64_t step) {
    // A warning, so that ./demo.sh shows where a restarted job continues from.
    LogWarning(absl::StrCat("restored ", what, " (epoch ", epochs_done, ", step ", step, ")",
                            epochs_done >= epochs
                                ? absl::StrCat("; it already has all ", epochs,
                                               " epochs, nothing to train")
                                : absl::StrCat("; continuing with epoch ", epochs_done + 1)));
  };
  if (writer != nullptr) {
    const nlohmann::json metadata = {{"job_dir", AbsoluteJobDir(train.base_dir)},
                                     {"strategy", ts->strategy->name()},
                                     {"num_replicas", ts->strategy->num_replicas_in_sync()}};
    const JobSpec* job = &train.job;
    options.on_checkpoint = [writer, job, metadata,
                             watch](const TrainingState& state) -> absl::Status {
      const absl::Time start = absl::Now();
      absl::StatusOr<std::string> path =
          writer->Write(CheckpointFromTrainingState(state, *job, metadata));
      CheckpointEvent event;
      event.ok = path.ok();
      if (path.ok()) event.path = *path;
      event.error = std::string(path.status().message());
      event.step = state.global_step;
      event.epoch = state.epochs_done;
      event.took = absl::Now() - start;
      watch->observer()->OnCheckpoint(event);
      if (!path.ok()) return path.status();
      LogInfo(absl::StrCat("checkpoint ", *path, " written (epoch ", state.epochs_done,
                           ", step ", state.global_step, ")"));
      return absl::OkStatus();
    };
  }
  return options;
}

// Reports a failure as one error record ("E 19:30:01.123 worker0] train: ..."): its time
// is when the failure was seen, which a deadline's check reads back. Returns its exit
// code. Once the all-reduce service runs, peers'
// calls may be waiting in it and a broken ring may hold sends to a dead peer: leave at
// once rather than wait for them in destructors.
int Fail(const TrainStrategy& ts, int code, absl::string_view message) {
  LogError(absl::StrCat("train: ", message));
  if (ts.serving) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }
  return code;
}

}  // namespace

int RunTrainTask(DaemonRuntime* runtime) {
  // The model's products are small: one BLAS thread beats two on the 2-core machines,
  // and leaves the other core to the batch prefetch thread. OPENBLAS_NUM_THREADS wins.
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(1);
  ShutdownSignal* shutdown = runtime->shutdown();
  runtime->SetSignalHandler([shutdown](const std::string& signal_name) {
    LogWarning(absl::StrCat(signal_name, ": training stops at the end of this epoch, once "
                            "its checkpoint is written"));
    shutdown->Request(kExitPreempted, signal_name);
    return static_cast<int>(kExitPreempted);
  });
  TrainStrategy ts;
  absl::StatusOr<TrainJob> train = LoadTrainJob();
  if (!train.ok()) return Fail(ts, ExitCodeFor(train.status()), train.status().message());

  // The backend is made with the strategy, so a bad --device fails at once; "auto" says
  // in one line why it fell back to the CPU, as get_strategy()'s fallback does.
  if (absl::Status set_up = SetUpStrategy(runtime, train->job.batch_size, &ts); !set_up.ok()) {
    return Fail(ts, ExitCodeFor(set_up), set_up.message());
  }
  distribute::Strategy* strategy = ts.strategy.get();

  // Checkpoints: written and read by one process, as TensorFlow's chief (here rank 0,
  // which is the chief when TF_CONFIG has one); Fit sends the restored state to the rest.
  const std::string checkpoint_dir = ts.prints ? absl::GetFlag(FLAGS_checkpoint_dir) : "";
  absl::StatusOr<Restored> restored =
      ts.prints ? ReadStateToRestore(checkpoint_dir) : absl::StatusOr<Restored>(Restored());
  if (!restored.ok()) {
    return Fail(ts, ExitCodeFor(restored.status()), restored.status().message());
  }
  std::unique_ptr<CheckpointWriter> writer;
  if (!checkpoint_dir.empty()) {
    CheckpointWriter::Options wo;
    wo.keep = absl::GetFlag(FLAGS_keep_checkpoints);
    writer = std::make_unique<CheckpointWriter>(checkpoint_dir, wo);
    // Now, not at the first epoch's end (whose work would be lost).
    if (absl::Status writable = writer->CheckWritable(); !writable.ok()) {
      return Fail(ts, kExitBadConfiguration, writable.message());
    }
  }

  // Metrics and the dashboard (--metrics_port), TensorBoard files (--logdir) and the
  // progress bar on a terminal; every worker of a multi-worker job serves its metrics.
  const int replicas = strategy->num_replicas_in_sync();
  absl::StatusOr<std::unique_ptr<TrainMonitoring>> monitoring = TrainMonitoring::Start(
      runtime->metrics(), train->job,
      absl::StrCat("pstrain train: ", strategy->name(), ", ", replicas, " replica",
                   replicas == 1 ? "" : "s"),
      replicas, ts.prints);
  if (!monitoring.ok()) {
    return Fail(ts, ExitCodeFor(monitoring.status()), monitoring.status().message());
  }
  const FitOptions options =
      MakeFitOptions(*train, &ts, *restored, writer.get(), monitoring->get(), shutdown);
  absl::StatusOr<FitResult> result = Fit(train->job, train->data, strategy, options);
  if (ts.serving) {
    ts.ring->Close();
    runtime->StopServing(absl::Seconds(1));
  }
  if (!result.ok()) {
    return Fail(ts, ExitCodeFor(result.status()),
                absl::StrCat(train->path, ": ", result.status().message()));
  }
  if (result->nonfinite_skipped > 0) {
    LogInfo(absl::StrCat(result->nonfinite_skipped, " of ", result->steps,
                         " steps had a non-finite gradient and were skipped (\"nonfinite\": "
                         "\"skip\")"));
  }
  // Nothing trained: the restored state had every epoch already.
  const int epochs_done =
      result->history.empty() ? train->job.epochs : result->history.back().epoch;
  if (shutdown->requested() && epochs_done < train->job.epochs) {
    LogWarning(absl::StrCat("stopped by ", shutdown->reason(), " after epoch ", epochs_done,
                            " of ", train->job.epochs,
                            writer != nullptr ? "; a restart resumes from its checkpoint" : "",
                            "; exiting with code ", kExitPreempted));
    return kExitPreempted;
  }
  // The trained model as a .keras file, written by the process that keeps checkpoints.
  const std::string export_keras = absl::GetFlag(FLAGS_export_keras);
  if (ts.prints && !export_keras.empty()) {
    if (absl::Status exported = ExportKerasModel(train->job, result->weights, export_keras);
        !exported.ok()) {
      return Fail(ts, kExitFailure, absl::StrCat("--export_keras: ", exported.message()));
    }
    LogInfo(absl::StrCat("wrote the trained model to ", export_keras));
  }
  (*monitoring)->Finish();
  return kExitOk;
}

}  // namespace pstrain
