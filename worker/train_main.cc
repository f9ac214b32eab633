// train: trains a job spec, printing Keras-style epoch lines on stdout and, when stderr
// is a terminal, a progress bar there. --metrics_port serves Prometheus metrics and a
// live dashboard; --logdir writes TensorBoard event files (worker/train_monitoring.h).
//
//   train --job=examples/fashion_mnist.json [--epochs=N] [--device=cpu|auto|cuda[:N]]
//       --strategy=default                 one replica in this process (TensorFlow's default)
//       --strategy=mirrored [--devices=cpu:0,cpu:1|cuda:0,cuda:1]
//                                          K replicas in lockstep, one thread per device
//       --strategy=multi_worker_mirrored   this process is one worker of a synchronous
//                                          cluster read from TF_CONFIG (chief, if any, then
//                                          workers are the ring's ranks); gradients are
//                                          ring all-reduced over gRPC on the task's port;
//                                          only rank 0 prints epoch lines
//         [--collective=auto|ring|nccl]     auto: NCCL when the binary was built with CUDA
//                                          and every worker runs on a CUDA device (agreed
//                                          over the ring), else the gRPC ring; nccl when
//                                          that is not possible: exit 2
//       --checkpoint_dir=DIR [--keep_checkpoints=3] [--restore=latest|none|PATH]
//                                          a checkpoint per epoch (so also at the end),
//                                          written by this process, or in a multi-worker
//                                          job by rank 0 only (as TensorFlow's chief); a
//                                          job continues from --restore (default: the
//                                          newest good one in DIR). Rank 0 reads it and
//                                          sends it through the ring, so only rank 0 needs
//                                          DIR.
//       --export_keras=PATH.keras          the trained model as a Keras 3 .keras file at
//                                          the end (rank 0 only in a multi-worker job)
//
// Exit status: 0 trained; 2 bad flags, TF_CONFIG, job spec or data (one line on stderr);
// 1 a failure while training (e.g. a peer worker died: named in the message).

#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/keras_export.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/math/backend_factory.h"
#include "common/model/job_spec.h"
#include "common/cluster_spec.h"
#include "common/rpc/grpc_util.h"
#include "worker/allreduce/chunk_mailbox.h"
#include "worker/allreduce/collective_selection.h"
#include "worker/allreduce/grpc_ring_transport.h"
#include "worker/allreduce/ring_allreduce.h"
#include "worker/fit.h"
#include "common/training/training_state.h"
#include "worker/mirrored_strategy.h"
#include "worker/multi_worker_mirrored_strategy.h"
#include "worker/strategy.h"
#include "worker/train_monitoring.h"

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

// One error record ("E 19:30:01.123 worker0] train: ..."): its time is when the failure
// was seen, which a deadline's check reads back.
int Fail(int code, const std::string& message) {
  LogError(absl::StrCat("train: ", message));
  return code;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

int Main() {
  const std::string job_path = absl::GetFlag(FLAGS_job);
  if (job_path.empty()) return Fail(2, "--job=FILE is required");
  const std::string device = absl::GetFlag(FLAGS_device);
  if (absl::GetFlag(FLAGS_epochs) < 0) return Fail(2, "--epochs must be >= 0");
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const std::string restore_flag = absl::GetFlag(FLAGS_restore);
  if (absl::GetFlag(FLAGS_keep_checkpoints) < 1) {
    return Fail(2, "--keep_checkpoints must be at least 1");
  }
  const std::string export_keras = absl::GetFlag(FLAGS_export_keras);
  if (!export_keras.empty() && !absl::EndsWith(export_keras, ".keras")) {
    return Fail(2, absl::StrCat("--export_keras=", export_keras,
                                " does not end in .keras (Keras loads only those)"));
  }

  std::ifstream in(job_path);
  if (!in) return Fail(2, absl::StrCat(job_path, ": cannot read the job spec"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string base_dir = DirectoryOf(job_path);
  absl::StatusOr<JobSpec> job = ParseJobSpec(text.str(), base_dir);
  if (!job.ok()) return Fail(2, absl::StrCat(job_path, ": ", job.status().message()));
  // The job as it runs is what a checkpoint stores (tools/evaluate reads it back).
  if (absl::GetFlag(FLAGS_epochs) > 0) job->epochs = absl::GetFlag(FLAGS_epochs);
  absl::StatusOr<FitData> data = LoadFitData(*job, base_dir);
  if (!data.ok()) return Fail(2, absl::StrCat(job_path, ": ", data.status().message()));

  // The backend is chosen before training so a bad --device fails at once; "auto" says in
  // one line why it fell back to the CPU, as get_strategy()'s fallback does.
  std::string note;
  // mirrored makes its backends from --devices; --device serves the other strategies.
  absl::StatusOr<std::unique_ptr<Backend>> first_backend =
      absl::GetFlag(FLAGS_strategy) == "mirrored" ? std::unique_ptr<Backend>()
                                                  : CreateBackend(device, &note);
  if (!first_backend.ok()) {
    return Fail(absl::IsInvalidArgument(first_backend.status()) ? 2 : 1,
                absl::StrCat("--device=", device, ": ", first_backend.status().message()));
  }
  if (!note.empty()) LogInfo(note);

  const std::string strategy_name = absl::GetFlag(FLAGS_strategy);
  std::vector<std::string> replica_devices;  // mirrored: CreateBackend strings per replica
  // multi_worker_mirrored: the ring's transport and the server that fills its mailbox.
  ChunkMailbox mailbox;
  std::unique_ptr<CollectiveService> collective_service;
  RunningServer server;
  std::unique_ptr<GrpcRingTransport> transport;
  std::unique_ptr<Strategy> strategy;  // after the transport: destroyed before it
  bool prints = true;  // only rank 0 of a multi-worker job writes epoch lines
  if (strategy_name == "default") {
    strategy = CreateDefaultStrategy();
    std::cout << "pstrain: default strategy, " << DescribeGlobalBatch(job->batch_size, 1)
              << std::endl;
  } else if (strategy_name == "mirrored") {
    absl::StatusOr<std::unique_ptr<MirroredStrategy>> mirrored =
        CreateMirroredStrategy(absl::GetFlag(FLAGS_devices));
    if (!mirrored.ok()) return Fail(2, absl::StrCat("--devices: ", mirrored.status().message()));
    for (const std::string& d : (*mirrored)->devices()) {
      replica_devices.push_back(BackendDeviceFor(d));
    }
    // fit.batch_size is the global batch, as in Keras's fit under MirroredStrategy.
    std::cout << "pstrain: mirrored strategy, num_replicas_in_sync=" << replica_devices.size()
              << " (" << absl::StrJoin((*mirrored)->devices(), ", ") << "), "
              << DescribeGlobalBatch(job->batch_size, static_cast<int>(replica_devices.size()))
              << std::endl;
    strategy = *std::move(mirrored);
  } else if (strategy_name == "multi_worker_mirrored") {
    absl::StatusOr<TfConfig> config = TfConfigFromEnvironment();
    if (!config.ok()) return Fail(2, std::string(config.status().message()));
    // TensorFlow's order: the chief (if any) is worker 0 of the collective, then workers.
    GrpcRingOptions ring;
    int rank = -1;
    for (const char* job_name : {"chief", "worker"}) {
      const std::vector<std::string>& tasks = config->cluster.tasks(job_name);
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (config->task.type == job_name && config->task.index == static_cast<int>(i)) {
          rank = static_cast<int>(ring.addresses.size());
        }
        ring.addresses.push_back(tasks[i]);
        ring.names.push_back(absl::StrCat(job_name, " ", i));
      }
    }
    if (rank < 0) {
      return Fail(2, absl::StrCat("TF_CONFIG: multi_worker_mirrored runs on chief and worker "
                                  "tasks, not ", TaskIdToString(config->task)));
    }
    ring.rank = rank;
    const int n = static_cast<int>(ring.addresses.size());
    SetLogTag(absl::StrCat(config->task.type, config->task.index));
    absl::StatusOr<std::string> listen = ListenAddressFor(ring.addresses[rank]);
    if (!listen.ok()) return Fail(2, absl::StrCat("TF_CONFIG: ", listen.status().message()));
    collective_service = std::make_unique<CollectiveService>(&mailbox, (rank + n - 1) % n);
    ServerOptions so;
    so.listen_address = *listen;
    so.services = {collective_service.get()};
    absl::StatusOr<RunningServer> started = StartServer(so);
    if (!started.ok()) return Fail(1, std::string(started.status().message()));
    server = *std::move(started);
    absl::StatusOr<std::unique_ptr<GrpcRingTransport>> t =
        GrpcRingTransport::Create(ring, &mailbox);
    if (!t.ok()) return Fail(2, std::string(t.status().message()));
    transport = *std::move(t);
    MultiWorkerMirroredOptions mo;
    mo.ring.timeout = absl::GetFlag(FLAGS_collective_timeout);
    mo.ring.bucket_bytes = absl::GetFlag(FLAGS_allreduce_bucket_bytes);
    mo.ring.chunk_bytes = absl::GetFlag(FLAGS_allreduce_chunk_bytes);
    mo.startup_timeout = absl::GetFlag(FLAGS_startup_timeout);
    absl::StatusOr<CollectiveKind> collective_kind =
        ParseCollectiveKind(absl::GetFlag(FLAGS_collective));
    if (!collective_kind.ok()) {
      return Fail(2, absl::StrCat("--collective: ", collective_kind.status().message()));
    }
    auto mw = std::make_unique<MultiWorkerMirroredStrategy>(transport.get(), mo);
    prints = rank == 0;
    LogInfo(absl::StrCat("multi_worker_mirrored: rank ", rank, " of ", n, ", serving the "
                         "all-reduce on ", *listen));
    // This worker's CUDA device (--device=cuda[:N], or auto resolved to CUDA), else -1.
    int cuda_device = -1;
    const std::string backend_name = (*first_backend)->name();
    if (absl::StartsWith(backend_name, "cuda:") &&
        !absl::SimpleAtoi(backend_name.substr(5), &cuda_device)) {
      cuda_device = -1;
    }
    // All workers agree (one small ring all-reduce) on the ring or NCCL.
    absl::StatusOr<CollectiveSelection> selection = SelectCollective(
        [&mw](absl::Span<const absl::Span<float>> t) { return mw->RingSumAtStartup(t); }, rank,
        n, *collective_kind, cuda_device, absl::GetFlag(FLAGS_collective_timeout));
    if (!selection.ok()) {
      return Fail(absl::IsFailedPrecondition(selection.status()) ? 2 : 1,
                  std::string(selection.status().message()));
    }
    LogInfo(selection->description);
    if (selection->nccl != nullptr) mw->UseCollective(std::move(selection->nccl));
    strategy = std::move(mw);
    if (prints) {
      std::cout << "pstrain: multi_worker_mirrored strategy, num_replicas_in_sync=" << n << " ("
                << absl::StrJoin(ring.names, ", ") << "), "
                << DescribeGlobalBatch(job->batch_size, n) << std::endl;
    }
  } else {
    return Fail(2, absl::StrCat("--strategy=", strategy_name,
                                " is not one of default, mirrored, multi_worker_mirrored"));
  }
  // Checkpoints: written and read by one process, as TensorFlow's chief (here rank 0,
  // which is the chief when TF_CONFIG has one); Fit sends the restored state to the rest.
  const bool checkpoints_here = prints;
  // Once the all-reduce server runs, peers' calls may be waiting in it: leave at once.
  auto fail_now = [&](int code, const std::string& message) {
    Fail(code, message);
    if (server.server != nullptr) {
      std::fflush(stdout);
      std::_Exit(code);
    }
    return code;
  };
  std::unique_ptr<CheckpointReader> restore;
  TrainingState restore_state;
  std::string restore_path;  // empty: nothing to restore here
  if (checkpoints_here && restore_flag == "latest") {
    if (!checkpoint_dir.empty()) {
      // Opening the root picks the newest checkpoint that verifies; one that does not is
      // reported in one line and the one before it is used.
      absl::StatusOr<std::unique_ptr<CheckpointReader>> found =
          CheckpointReader::Open(checkpoint_dir);
      if (found.ok()) {
        restore = *std::move(found);
      } else if (absl::IsNotFound(found.status())) {
        LogInfo(absl::StrCat("no checkpoint in ", checkpoint_dir,
                             "; starting from freshly initialized variables"));
      } else {
        return fail_now(1, absl::StrCat("cannot restore: ", found.status().message()));
      }
    }
  } else if (checkpoints_here && restore_flag != "none" && !restore_flag.empty()) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> opened = CheckpointReader::Open(restore_flag);
    if (!opened.ok()) {
      return fail_now(2, absl::StrCat("--restore=", restore_flag, ": ", opened.status().message()));
    }
    restore = *std::move(opened);
  }
  if (restore != nullptr) {
    absl::StatusOr<TrainingState> state = TrainingStateFromCheckpoint(*restore);
    if (!state.ok()) return fail_now(1, absl::StrCat("cannot restore: ", state.status().message()));
    restore_state = *std::move(state);
    restore_path = restore->path();
    restore.reset();  // its tensors are copied into restore_state
  }
  std::unique_ptr<CheckpointWriter> writer;
  if (checkpoints_here && !checkpoint_dir.empty()) {
    CheckpointWriter::Options wo;
    wo.keep = absl::GetFlag(FLAGS_keep_checkpoints);
    writer = std::make_unique<CheckpointWriter>(checkpoint_dir, wo);
    // Now, not at the first epoch's end (whose work would be lost).
    if (absl::Status writable = writer->CheckWritable(); !writable.ok()) {
      return fail_now(2, std::string(writable.message()));
    }
  }

  // Metrics and the dashboard (--metrics_port), TensorBoard files (--logdir) and the
  // progress bar on a terminal; every worker of a multi-worker job serves its metrics.
  std::string task_type = "train";
  int task_index = 0;
  if (strategy_name == "multi_worker_mirrored") {
    absl::StatusOr<TfConfig> config = TfConfigFromEnvironment();
    if (config.ok()) {
      task_type = config->task.type;
      task_index = config->task.index;
    }
  }
  absl::StatusOr<std::unique_ptr<TrainMonitoring>> monitoring = TrainMonitoring::Start(
      *job,
      absl::StrCat("pstrain train: ", strategy->name(), ", ", strategy->num_replicas_in_sync(),
                   " replica", strategy->num_replicas_in_sync() == 1 ? "" : "s"),
      strategy->num_replicas_in_sync(), task_type, task_index, prints);
  if (!monitoring.ok()) {
    return fail_now(absl::IsInvalidArgument(monitoring.status()) ? 2 : 1,
                    std::string(monitoring.status().message()));
  }
  FitOptions options;
  options.epochs = absl::GetFlag(FLAGS_epochs);
  // Replica 0 takes the backend made above (a CUDA context is costly to create twice).
  options.make_backend = [&](int replica) -> absl::StatusOr<std::unique_ptr<Backend>> {
    if (!replica_devices.empty()) return CreateBackend(replica_devices[replica], nullptr);
    if (replica == 0 && *first_backend != nullptr) return std::move(*first_backend);
    return CreateBackend(device, nullptr);
  };
  TrainMonitoring* watch = monitoring->get();
  options.on_batch = [watch](const BatchProgress& p) { watch->OnBatch(p); };
  options.on_epoch = [watch, prints](const EpochSummary& s) {
    // The observers first: the progress bar clears its line for the epoch line.
    watch->observer()->OnEpoch(s);
    if (prints) std::cout << FormatEpochLine(s) << std::endl;
    return true;
  };
  if (!restore_path.empty()) options.restore = &restore_state;
  const int epochs = job->epochs;
  options.on_restored = [&](int epochs_done, int64_t step) {
    const std::string what =
        restore_path.empty() ? std::string("rank 0's checkpoint") : restore_path;
    LogInfo(absl::StrCat("restored ", what, " (epoch ", epochs_done, ", step ", step, ")",
                         epochs_done >= epochs
                             ? absl::StrCat("; it already has all ", epochs,
                                            " epochs, nothing to train")
                             : absl::StrCat("; continuing with epoch ", epochs_done + 1)));
  };
  if (writer != nullptr) {
    // evaluate resolves the job's relative data paths against job_dir, from wherever it
    // runs: make it absolute.
    std::string job_dir = base_dir;
    char cwd[4096];
    if (job_dir.empty() || job_dir[0] != '/') {
      if (getcwd(cwd, sizeof(cwd)) != nullptr) {
        job_dir = job_dir == "." ? std::string(cwd) : absl::StrCat(cwd, "/", job_dir);
      }
    }
    const nlohmann::json metadata = {{"job_dir", job_dir},
                                     {"strategy", strategy->name()},
                                     {"num_replicas", strategy->num_replicas_in_sync()}};
    options.on_checkpoint = [&, metadata](const TrainingState& state) -> absl::Status {
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
  absl::StatusOr<FitResult> result = Fit(*job, *data, strategy.get(), options);
  if (server.server != nullptr) {
    mailbox.Close();
    server.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  if (!result.ok()) {
    const int code = absl::IsInvalidArgument(result.status()) ? 2 : 1;
    Fail(code, absl::StrCat(job_path, ": ", result.status().message()));
    // A broken ring may still hold sends waiting on a dead peer: leave at once rather
    // than wait for them in destructors.
    if (server.server != nullptr) {
      std::fflush(stdout);
      std::_Exit(code);
    }
    return code;
  }
  if (result->nonfinite_skipped > 0) {
    LogInfo(absl::StrCat(result->nonfinite_skipped, " of ", result->steps,
                         " steps had a non-finite gradient and were skipped (\"nonfinite\": "
                         "\"skip\")"));
  }
  if (checkpoints_here && !export_keras.empty()) {
    if (absl::Status exported = ExportKerasModel(*job, result->weights, export_keras);
        !exported.ok()) {
      return Fail(1, absl::StrCat("--export_keras: ", exported.message()));
    }
    LogInfo(absl::StrCat("wrote the trained model to ", export_keras));
  }
  watch->Finish();
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains a job spec in this process.\n"
      "  train --job=FILE [--epochs=N] [--device=cpu|auto|cuda[:N]]\n"
      "        [--strategy=default|mirrored|multi_worker_mirrored] [--devices=cpu:0,cpu:1]\n"
      "        [--checkpoint_dir=DIR] [--keep_checkpoints=3] [--restore=latest|none|PATH]");
  absl::ParseCommandLine(argc, argv);
  // Every batch is a fresh tensor of a few hundred KiB.
  pstrain::KeepLargeBlocksInHeap();
  // The model's products are small: one BLAS thread beats two on the 2-core machines,
  // and leaves the other core to the batch prefetch thread. OPENBLAS_NUM_THREADS wins.
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(1);
  return pstrain::Main();
}
