// TensorFlow's custom training loop, in C++ on pstrain's public API (pstrain/pstrain.h):
// one step function, `TrainStep`, runs under every strategy. The synchronous strategies
// iterate a distributed dataset and call strategy->Run themselves; under
// parameter_server the chief schedules the same step on the workers through a
// ClusterCoordinator. README.md shows this file next to the Python it mirrors.
//
//   custom_loop --strategy=default|mirrored|multi_worker_mirrored|parameter_server
//               [--job=examples/fashion_mnist.json] [--epochs=N] [--devices=cpu:0,cpu:1]
//               [--checkpoint_dir=DIR]
//
// With --checkpoint_dir (parameter_server) the chief resumes from the newest checkpoint in
// DIR, writes one after every epoch, and on SIGTERM/SIGINT stops scheduling, writes one
// and exits 42 (preempted) leaving the ps and workers running for its restart, as the
// chief daemon does (TensorFlow's CheckpointManager and PreemptionCheckpointHandler).
//
// multi_worker_mirrored and parameter_server read the cluster and this task from
// TF_CONFIG; every task runs this same program, with the job's token (PSTRAIN_AUTH_TOKEN
// or --auth_token_file) or certificates (--tls_dir), as the daemons are (README
// "Security"); --insecure turns authorization off. The task that reports (the one process,
// rank 0, or the parameter_server chief) prints a Keras-style line per epoch, evaluated on
// the job's validation data. Exit status: 0 trained; 2 bad flags or input; 1 a failure;
// 42 preempted (a checkpoint was written to resume from).

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "pstrain/pstrain.h"

ABSL_FLAG(std::string, strategy, "default",
          "default, mirrored, multi_worker_mirrored or parameter_server.");
ABSL_FLAG(std::string, job, "examples/fashion_mnist.json",
          "Job spec: its model, compile settings, batch size, epochs, data and seed.");
ABSL_FLAG(int, epochs, 0, "Overrides the job's fit.epochs when > 0.");
ABSL_FLAG(std::string, devices, "", "mirrored: cpu:0,cpu:1 or cuda:0,cuda:1.");
ABSL_FLAG(std::string, device, "cpu", "The other strategies: cpu, auto, cuda or cuda:N.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "parameter_server: the chief writes a checkpoint here after every epoch and on "
          "SIGTERM (then exits 42, leaving the ps and workers running), and resumes from the "
          "newest one here when it starts.");

namespace dist = pstrain::distribute;

namespace {

// The step function: TensorFlow's
//   def train_step(inputs):
//     with tf.GradientTape() as tape: loss = ... model(x, training=True) ...
//     grads = tape.gradient(loss, model.trainable_variables)
//     optimizer.apply_gradients(zip(grads, model.trainable_variables))
//     return loss
// It returns the slice's loss sum, correct predictions and samples.
absl::StatusOr<dist::StepResult> TrainStep(dist::DistributedModel& model,
                                           const dist::ReplicaContext& ctx,
                                           const dist::ReplicaBatch& batch) {
  PS_ASSIGN_OR_RETURN(dist::Gradients grads, model.ComputeGradients(ctx, batch));
  const dist::StepResult metrics = grads.metrics;
  PS_RETURN_IF_ERROR(model.ApplyGradients(ctx, std::move(grads)));
  return metrics;
}

struct Job {
  dist::JobFile file;
  dist::FitData data;
  int epochs = 0;
  std::string checkpoint_dir;  // parameter_server only
};

// The epoch's line, as every pstrain trainer prints it, on the reporting task.
absl::Status ReportEpoch(dist::DistributedModel& model, const Job& job, int epoch,
                         const dist::StepResult& totals, int64_t steps, absl::Time start) {
  dist::EpochSummary summary;
  summary.epoch = epoch + 1;
  summary.epochs = job.epochs;
  summary.samples = totals.samples;
  summary.steps = steps;
  const double n = static_cast<double>(totals.samples > 0 ? totals.samples : 1);
  summary.loss = totals.loss_sum / n;
  summary.accuracy = static_cast<double>(totals.correct) / n;
  if (job.data.validation != nullptr) {
    PS_ASSIGN_OR_RETURN(dist::EvaluationResult val,
                        model.Evaluate(*job.data.validation, job.file.spec.batch_size));
    summary.has_validation = true;
    summary.val_loss = val.loss;
    summary.val_accuracy = val.accuracy;
  }
  summary.elapsed = absl::Now() - start;
  std::printf("%s\n", dist::FormatEpochLine(summary).c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

// default, mirrored, multi_worker_mirrored: TensorFlow's
//   dist_dataset = strategy.experimental_distribute_dataset(dataset)
//   for x in dist_dataset:
//     per_replica_losses = strategy.run(train_step, args=(x,))
//     total_loss += strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)
absl::Status TrainInSync(dist::Strategy& strategy, dist::DistributedModel& model, const Job& job) {
  dist::DistributedDatasetOptions options;
  options.global_batch_size = job.file.spec.batch_size;  // split across the replicas
  options.shuffle = job.file.spec.shuffle;
  options.seed = job.file.spec.seed;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<dist::DistributedDataset> dataset,
                      strategy.ExperimentalDistributeDataset(job.data.train, options));
  auto step_fn = [&model](const dist::ReplicaContext& ctx, const dist::ReplicaBatch& batch) {
    return TrainStep(model, ctx, batch);
  };
  for (int epoch = 0; epoch < job.epochs; ++epoch) {
    const absl::Time start = absl::Now();
    PS_ASSIGN_OR_RETURN(std::unique_ptr<dist::DistributedIterator> it,
                        dataset->MakeIterator(epoch));
    dist::StepResult totals;
    int64_t steps = 0;
    while (true) {
      absl::StatusOr<dist::DistributedBatch> batch = it->Next();
      if (absl::IsOutOfRange(batch.status())) break;  // the end of the epoch's data
      PS_RETURN_IF_ERROR(batch.status());
      PS_ASSIGN_OR_RETURN(dist::PerReplica<dist::StepResult> per_replica,
                          strategy.Run(step_fn, *batch));
      PS_ASSIGN_OR_RETURN(dist::StepResult step,
                          strategy.Reduce(dist::ReduceOp::kSum, per_replica));
      totals.loss_sum += step.loss_sum;
      totals.correct += step.correct;
      totals.samples += step.samples;
      ++steps;
    }
    if (strategy.is_chief()) PS_RETURN_IF_ERROR(ReportEpoch(model, job, epoch, totals, steps, start));
  }
  return absl::OkStatus();
}

// TensorFlow: `checkpoint.restore(manager.latest_checkpoint)` on the parameter_server
// chief, with SIGTERM watched (PreemptionCheckpointHandler) when there is a folder. The
// progress to go on from: the newest checkpoint's, or the start.
absl::StatusOr<dist::TrainingProgress> ResumeFrom(dist::Strategy& strategy,
                                                  const std::string& checkpoint_dir) {
  if (checkpoint_dir.empty()) return dist::TrainingProgress();
  dist::PreemptionWatcher::Watch();
  absl::StatusOr<dist::TrainingProgress> restored = strategy.Restore(checkpoint_dir);
  if (absl::IsNotFound(restored.status())) return dist::TrainingProgress();
  if (!restored.ok()) return restored.status();
  std::printf("resumed from the checkpoint of epoch %d, step %lld\n", restored->epochs_done,
              static_cast<long long>(restored->global_step));
  std::fflush(stdout);
  return restored;
}

// After `signal`, with every function scheduled back (each variable belongs to one step):
// a checkpoint of this step (unless the newest, of `saved_step`, is), the tasks left
// running for the restarted chief, and ABORTED naming the checkpoint (exit 42).
absl::Status StopForRestart(dist::Strategy& strategy, const std::string& checkpoint_dir,
                            const dist::TrainingProgress& progress, int64_t saved_step,
                            const char* signal) {
  std::string newest = "of this step already";
  if (progress.global_step != saved_step) {
    PS_ASSIGN_OR_RETURN(newest, strategy.Save(checkpoint_dir, progress));
  }
  strategy.LeaveTasksRunning();
  return absl::AbortedError(absl::StrCat(signal, ": preempted at step ", progress.global_step,
                                         "; the newest checkpoint is ", newest));
}

// parameter_server: TensorFlow's
//   coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
//   per_worker_iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
//   @tf.function
//   def train_fn(iterator):
//     return strategy.run(train_step, args=(next(iterator),))
//   for epoch ...:
//     for _ in range(steps_per_epoch):
//       results.append(coordinator.schedule(train_fn, args=(per_worker_iterator,)))
//     coordinator.join()
// Every task runs it: a worker serves train_fn, the chief schedules it.
absl::Status TrainWithCoordinator(dist::Strategy& strategy, dist::DistributedModel& model,
                                  const Job& job) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<dist::ClusterCoordinator> coordinator,
                      dist::ClusterCoordinator::Create(&strategy));
  // Each worker's own endless stream of batches of fit.batch_size, shuffled its own way.
  PS_ASSIGN_OR_RETURN(
      dist::PerWorkerIterator per_worker_iterator,
      coordinator->CreatePerWorkerIterator(
          [&](int worker) -> absl::StatusOr<std::unique_ptr<dist::DistributedIterator>> {
            dist::DistributedDatasetOptions options;
            options.global_batch_size = job.file.spec.batch_size;
            options.seed = job.file.spec.seed + static_cast<uint64_t>(worker) + 1;
            options.repeat = -1;
            PS_ASSIGN_OR_RETURN(std::unique_ptr<dist::DistributedDataset> dataset,
                                strategy.ExperimentalDistributeDataset(job.data.train, options));
            return dataset->MakeIterator(0);
          }));
  auto step_fn = [&model](const dist::ReplicaContext& ctx, const dist::ReplicaBatch& batch) {
    return TrainStep(model, ctx, batch);
  };
  dist::RemoteFunction<dist::StepResult> train_fn = coordinator->Register(
      "train_fn", [&](dist::DistributedIterator& iterator) -> absl::StatusOr<dist::StepResult> {
        PS_ASSIGN_OR_RETURN(dist::DistributedBatch batch, iterator.Next());
        PS_ASSIGN_OR_RETURN(dist::PerReplica<dist::StepResult> per_replica,
                            strategy.Run(step_fn, batch));
        return strategy.Reduce(dist::ReduceOp::kSum, per_replica);
      });
  if (strategy.task().type == dist::Role::kWorker) return coordinator->Serve();

  // An epoch is one pass over the data, spread over the workers.
  const int64_t rows = job.data.train->num_examples();
  const int64_t batch = job.file.spec.batch_size;
  const int64_t steps_per_epoch = job.file.spec.steps_per_epoch > 0
                                      ? job.file.spec.steps_per_epoch
                                      : (rows + batch - 1) / batch;
  const std::string& checkpoint_dir = job.checkpoint_dir;
  PS_ASSIGN_OR_RETURN(dist::TrainingProgress progress, ResumeFrom(strategy, checkpoint_dir));
  int64_t saved_step = progress.global_step;  // the newest checkpoint's (or the start's)
  // Without checkpoints an epoch is scheduled whole; with them, in rounds, so that a
  // preemption waits for a round, not an epoch, before its checkpoint.
  const int64_t round_steps = checkpoint_dir.empty() ? steps_per_epoch : 100;
  for (int epoch = progress.epochs_done; epoch < job.epochs; ++epoch) {
    const absl::Time start = absl::Now();
    const int64_t done_before = progress.global_step - int64_t{epoch} * steps_per_epoch;
    int64_t step = std::clamp<int64_t>(done_before, 0, steps_per_epoch);
    dist::StepResult totals;
    while (step < steps_per_epoch) {
      std::vector<dist::RemoteValue<dist::StepResult>> results;
      for (int64_t n = 0; n < round_steps && step < steps_per_epoch; ++n, ++step) {
        results.push_back(coordinator->Schedule(train_fn, per_worker_iterator));
      }
      if (absl::Status joined = coordinator->Join(); !joined.ok()) {
        // Preempted while a failed ps was awaited: no checkpoint can be read now; the
        // restarted chief resumes from the newest one, and finds its tasks waiting.
        if (dist::PreemptionWatcher::Preempted() != nullptr) strategy.LeaveTasksRunning();
        return joined;
      }
      for (const dist::RemoteValue<dist::StepResult>& result : results) {
        PS_ASSIGN_OR_RETURN(dist::StepResult one, result.Fetch());
        totals.loss_sum += one.loss_sum;
        totals.correct += one.correct;
        totals.samples += one.samples;
      }
      progress.global_step += static_cast<int64_t>(results.size());
      if (const char* signal = dist::PreemptionWatcher::Preempted(); signal != nullptr) {
        return StopForRestart(strategy, checkpoint_dir, progress, saved_step, signal);
      }
    }
    PS_RETURN_IF_ERROR(ReportEpoch(model, job, epoch, totals, steps_per_epoch, start));
    progress.epochs_done = epoch + 1;
    if (!checkpoint_dir.empty()) {
      PS_RETURN_IF_ERROR(strategy.Save(checkpoint_dir, progress).status());
      saved_step = progress.global_step;
    }
  }
  std::printf("functions run per worker:");
  for (int64_t n : coordinator->functions_run_per_worker()) std::printf(" %lld", static_cast<long long>(n));
  std::printf("\n");
  // Who the chief found alive, lost or back (the chief daemon's membership rules).
  std::string members;
  for (const dist::MemberStatus& m : coordinator->members()) {
    absl::StrAppend(&members, members.empty() ? "" : ", ", dist::RoleName(m.task.type), " ",
                    m.task.index, " ", dist::MemberStateName(m.state));
  }
  std::printf("members: %s\n", members.c_str());
  return absl::OkStatus();
}

absl::Status Main() {
  dist::StrategyOptions options;
  PS_ASSIGN_OR_RETURN(options.strategy, dist::ParseStrategyKind(absl::GetFlag(FLAGS_strategy)));
  options.devices = absl::GetFlag(FLAGS_devices);
  options.device = absl::GetFlag(FLAGS_device);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<dist::Strategy> strategy, dist::CreateStrategy(options));
  // TensorFlow: `if task_type == "ps": server.join()`.
  if (strategy->task().type == dist::Role::kPs) return strategy->JoinServer();

  Job job;
  job.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (!job.checkpoint_dir.empty() && strategy->kind() != dist::StrategyKind::kParameterServer) {
    return absl::InvalidArgumentError(
        "--checkpoint_dir: a custom loop checkpoints under parameter_server; the other "
        "strategies' checkpoints are train's (train --checkpoint_dir)");
  }
  PS_ASSIGN_OR_RETURN(job.file, dist::ReadJobFile(absl::GetFlag(FLAGS_job)));
  job.epochs = absl::GetFlag(FLAGS_epochs) > 0 ? absl::GetFlag(FLAGS_epochs) : job.file.spec.epochs;
  PS_ASSIGN_OR_RETURN(job.data, dist::LoadJobData(job.file));
  // TensorFlow: `with strategy.scope(): model = ...; optimizer = ...`.
  PS_ASSIGN_OR_RETURN(std::unique_ptr<dist::DistributedModel> model,
                      strategy->CreateModel(dist::ModelOptions::FromJobSpec(job.file.spec)));
  PS_RETURN_IF_ERROR(model->CheckData(*job.data.train, "data.train"));
  if (strategy->is_chief()) {
    std::printf("pstrain custom loop: %s strategy, num_replicas_in_sync=%d\n",
                strategy->name().c_str(), strategy->num_replicas_in_sync());
    std::fflush(stdout);
  }
  if (strategy->kind() == dist::StrategyKind::kParameterServer) return TrainWithCoordinator(*strategy, *model, job);
  return TrainInSync(*strategy, *model, job);
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists these flags and exits 0, --version says what was built, as in every
  // pstrain binary.
  pstrain::ParseCommandLineWithUsage(
      argc, argv,
      "TensorFlow's custom training loop on pstrain's public API.\n"
      "  custom_loop --strategy=default|mirrored|multi_worker_mirrored|parameter_server\n"
      "              [--job=examples/fashion_mnist.json] [--epochs=N] [--devices=cpu:0,cpu:1]\n"
      "              [--checkpoint_dir=DIR]\n"
      "multi_worker_mirrored and parameter_server read the cluster and this task from "
      "TF_CONFIG, and need the job's token (PSTRAIN_AUTH_TOKEN or --auth_token_file), "
      "certificates (--tls_dir) or --insecure.");
  const absl::Status status = Main();
  if (status.ok()) return 0;
  std::fprintf(stderr, "custom_loop: %s\n", std::string(status.message()).c_str());
  if (absl::IsAborted(status) && dist::PreemptionWatcher::Preempted() != nullptr) {
    return dist::kExitPreempted;
  }
  return absl::IsInvalidArgument(status) || absl::IsNotFound(status) ? 2 : 1;
}
