#include "chief/coordinator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "chief/data_position.h"
#include "common/logging.h"
#include "common/model/optimizer.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "common/training/consistency_config.h"
#include "common/training/evaluator.h"
#include "common/training/training_state.h"
#include "distribute/failure.h"
#include "distribute/watched_worker.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

void AddFigures(const RunStepsResponse& from, RunStepsResponse* to) {
  to->set_loss_sum(to->loss_sum() + from.loss_sum());
  to->set_correct(to->correct() + from.correct());
  to->set_samples(to->samples() + from.samples());
  to->set_steps(to->steps() + from.steps());
}

// The optimizer as every ps of a job with `num_workers` workers runs it: every worker
// pushes its own batch's gradient, so with scale_learning_rate the rate grows with the
// global batch (per-replica batch x workers), the seed's best practice.
OptimizerConfig PsOptimizerFor(const JobSpec& job, const Model& model, size_t num_workers) {
  OptimizerConfig optimizer = job.optimizer;
  if (job.scale_learning_rate) {
    optimizer.set_learning_rate(optimizer.learning_rate() * static_cast<float>(num_workers));
  }
  // Non-trainable variables (BatchNormalization's moving statistics) live on the ps too:
  // each worker's push carries its batch's statistics, which the ps averages in.
  AddMovingAverageRules(model.variables(), &optimizer);
  return optimizer;
}

// The Checkpointer tells the coordinator's observer of every checkpoint.
Checkpointer::Options CheckpointerOptions(const Coordinator::Options& options) {
  Checkpointer::Options out = options.checkpoint;
  out.observer = options.observer;
  return out;
}

// How the coordinator's ps recovery waits between census rounds: it gives up on a
// preemption or a shutdown.
PsRecovery::Options PsRecoveryOptions(const Coordinator::Options& options, uint64_t seed,
                                      std::function<absl::Status(absl::Duration)> wait) {
  PsRecovery::Options out;
  out.timeout = options.ps_recovery_timeout;
  out.wait = std::move(wait);
  out.seed = seed;
  out.observer = options.observer;
  return out;
}

// A worker as the scheduler sees it: ready unless the coordinator found it lost (it
// rejoins at a segment's start or after a ps recovery: RejoinLostWorkers), so asking
// costs no RPC.
class SchedulerWorker : public distribute::ScheduledWorker {
 public:
  SchedulerWorker(std::string name, std::function<bool()> lost)
      : name_(std::move(name)), lost_(std::move(lost)) {}
  std::string name() const override { return name_; }
  absl::StatusOr<bool> Ready() override {
    if (lost_()) {
      return absl::UnavailableError(
          absl::StrCat(name_, ": lost; it trains again once it heartbeats and answers ready"));
    }
    return true;
  }

 private:
  const std::string name_;
  const std::function<bool()> lost_;
};

// How often the scheduler asks a lost worker whether it is back: a local look at lost_.
constexpr absl::Duration kLostWorkerPoll = absl::Milliseconds(20);
// How long the chunks wait once every worker is lost before the segment gives up (the
// epoch then fails naming them): long against kLostWorkerPoll, so that a worker that
// rejoined at the segment's start is seen ready first.
constexpr absl::Duration kEveryWorkerLostGrace = absl::Seconds(1);

// A worker's channel to a ps that was down stays in gRPC's reconnect backoff (about 1 s,
// then 1.6 times longer each time) after the ps is back, so the worker's calls may go on
// failing fast for a second or more after a recovery that succeeded. Recoveries without a
// step of progress in between are therefore spaced out (0.25 s before the second, doubling
// up to 4 s) and the ps is given up on only after this many in a row (about 8 s of
// pauses), not after a few that came milliseconds apart.
constexpr int kMaxRecoveriesWithoutProgress = 6;
constexpr absl::Duration kFirstRecoveryPause = absl::Milliseconds(250);
constexpr absl::Duration kMaxRecoveryPause = absl::Seconds(4);

}  // namespace

// What the chunk closures of one epoch segment share. Each worker's closures run on that
// worker's scheduler thread only, so its elements of `totals` and `previous` are written
// by one thread, and read by the epoch loop after Join.
struct Coordinator::SegmentRun {
  SegmentRun(const RunStepsRequest& b, ShardQueue* q, int num_workers)
      : base(b), queue(q), totals(num_workers), previous(num_workers) {
    for (int w = 0; w < num_workers; ++w) previous[w] = w;
  }
  // The chief's own failure (abort, a live checkpoint's write): the first one is kept,
  // and the queue closes so that the other closures stop after their chunk.
  void Fail(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu);
      if (error.ok()) error = status;
    }
    queue->Close();
  }
  absl::Status TakeError() {
    absl::MutexLock lock(&mu);
    return error;
  }

  const RunStepsRequest& base;
  ShardQueue* const queue;
  std::vector<RunStepsResponse> totals;  // per worker
  std::vector<int> previous;             // per worker: the shard its last chunk was of
  absl::Mutex mu;
  absl::Status error ABSL_GUARDED_BY(mu);
};

// One chunk of steps, taken from the segment's queue when the scheduler dispatches it;
// once it ran one, it queues its successor, so each segment keeps one closure per live
// worker going until the queue is done or paused.
class Coordinator::ChunkClosure : public distribute::Closure {
 public:
  ChunkClosure(Coordinator* coordinator, SegmentRun* segment)
      : coordinator_(coordinator), segment_(segment) {}
  std::string Describe() const override { return "a chunk of steps"; }
  std::string WhenRequeued() const override { return "its shard goes to the others"; }
  absl::Status Run(int worker) override {
    bool ran = false;
    const absl::Status status = coordinator_->RunChunk(worker, segment_, &ran);
    if (ran) {
      coordinator_->scheduler_->Schedule(std::make_shared<ChunkClosure>(coordinator_, segment_));
    }
    return status;
  }
  void Finish(absl::Status) override {}

 private:
  Coordinator* const coordinator_;  // Not owned.
  SegmentRun* const segment_;       // Not owned.
};

Coordinator::Coordinator(Options options, const JobSpec* job, Model* model,
                         Membership* membership, std::vector<PsClient*> ps,
                         std::vector<WorkerClient*> workers, const Dataset* validation,
                         const ShutdownSignal* abort,
                         std::function<void(const EpochSummary&)> on_epoch,
                         const CheckpointReader* restore)
    : options_(std::move(options)),
      job_(job),
      model_(model),
      membership_(membership),
      ps_(std::move(ps)),
      workers_(std::move(workers)),
      validation_(validation),
      abort_(abort),
      on_epoch_(std::move(on_epoch)),
      restore_(restore),
      variables_(model, ps_, PsOptimizerFor(*job, *model, workers_.size()),
                 options_.consistency),
      evaluator_(model, &variables_, ps_),
      checkpointer_(CheckpointerOptions(options_), job, &variables_),
      ps_recovery_(PsRecoveryOptions(options_, job->seed,
                                     [this](absl::Duration d) { return WaitDuringRecovery(d); }),
                   &variables_, &checkpointer_, restore) {
  variables_.SetInitialValues(job->initial_weights);
  variables_.SetInitialWeightsFile(job->initial_weights_file);
}

void Coordinator::SetPhase(JobPhase phase) {
  absl::MutexLock lock(&mu_);
  phase_ = phase;
}

int64_t Coordinator::global_step() const {
  absl::MutexLock lock(&mu_);
  return global_step_;
}

void Coordinator::Describe(ChiefStatusResponse* response) const {
  {
    absl::MutexLock lock(&mu_);
    distribute::SetPhase(phase_, response);
    response->set_epoch(epoch_);
    response->set_global_step(global_step_);
  }
  for (const VariablePlacementEntry& e : variables_.placement()) *response->add_placement() = e;
}

absl::Status Coordinator::Run() {
  ps_generation_ = absl::ToUnixNanos(absl::Now());
  checkpointer_.Start(0);
  absl::Status status = [&]() -> absl::Status {
    PS_RETURN_IF_ERROR(membership_->WaitForAll(
        options_.register_timeout, [this] { return abort_ != nullptr && abort_->requested(); }));
    LogInfo(absl::StrCat("all ", ps_.size(), " ps and ", workers_.size(),
                         " worker tasks registered"));
    PS_RETURN_IF_ERROR(WaitForWorkersReady());
    StartScheduler();
    PS_RETURN_IF_ERROR(CreateVariables());
    SetPhase(JobPhase::kTraining);
    int first_epoch = 0;
    const nlohmann::json* resume = nullptr;
    if (restore_ != nullptr) {
      PS_ASSIGN_OR_RETURN(first_epoch, RestoreCheckpoint(&resume));
    }
    for (int epoch = first_epoch; epoch < job_->epochs; ++epoch) {
      if (preempted()) return StopForRestart(epoch);
      {
        absl::MutexLock lock(&mu_);
        epoch_ = epoch + 1;
      }
      const absl::Time start = absl::Now();
      EpochSummary summary;
      summary.epoch = epoch + 1;
      summary.epochs = job_->epochs;
      PS_RETURN_IF_ERROR(RunEpoch(epoch, &summary, epoch == first_epoch ? resume : nullptr));
      if (validation_ != nullptr) {
        PS_RETURN_IF_ERROR(RetryAfterPsRecovery([&] { return Validate(&summary); }));
      }
      summary.elapsed = absl::Now() - start;
      on_epoch_(summary);
      // Every live worker's RunSteps has returned, so no push of theirs is in flight: each
      // shard's state belongs to the same step and the checkpoint is consistent across
      // the ps tasks (a worker lost by a deadline may still push until it notices).
      // The last epoch's checkpoint is the end-of-job one.
      const bool last = epoch + 1 == job_->epochs;
      if (checkpointer_.enabled() &&
          (last || options_.checkpoint_every_epoch || CheckpointDue())) {
        PS_RETURN_IF_ERROR(
            RetryAfterPsRecovery([&] { return WriteCheckpoint(epoch + 1, nullptr); }));
      }
    }
    return absl::OkStatus();
  }();
  // Every segment ended at a Join: no chunk is in flight.
  scheduler_.reset();
  LogStepsPerWorker();
  SetPhase(status.ok() ? JobPhase::kDone : JobPhase::kFailed);
  checkpointer_.EndJob(/*failed=*/!status.ok());
  return status;
}

void Coordinator::StartScheduler() {
  {
    absl::MutexLock lock(&mu_);
    lost_.assign(workers_.size(), false);
    steps_per_worker_.assign(workers_.size(), 0);
  }
  std::vector<distribute::ScheduledWorker*> scheduled;
  for (size_t w = 0; w < workers_.size(); ++w) {
    scheduled_workers_.push_back(std::make_unique<SchedulerWorker>(
        workers_[w]->name(), [this, w] {
          absl::MutexLock lock(&mu_);
          return static_cast<bool>(lost_[w]);
        }));
    scheduled.push_back(scheduled_workers_.back().get());
  }
  distribute::ClosureSchedulerOptions so;
  so.startup_timeout = options_.register_timeout;
  so.recovery_timeout = kEveryWorkerLostGrace;
  so.poll_interval = kLostWorkerPoll;
  so.recover_ps = [this] { return RecoverPsDuringEpoch(); };
  // The membership hears of the loss as a custom loop's does: the worker is lost there
  // too until its next heartbeat.
  so.on_worker_lost = distribute::ReportLostTo(
      membership_, [this](int w, const absl::Status&) { MarkLost(w); });
  scheduler_ = std::make_unique<distribute::ClosureScheduler>(std::move(scheduled), so);
}

void Coordinator::LogStepsPerWorker() const {
  std::vector<int64_t> steps;
  {
    absl::MutexLock lock(&mu_);
    steps = steps_per_worker_;
  }
  if (steps.empty()) return;
  // Each step is counted once, by the worker whose answer arrived: a chunk run again
  // after its worker was lost counts for the worker that answered.
  LogInfo(absl::StrCat("steps run per worker: ", absl::StrJoin(steps, " ")));
}

absl::Status Coordinator::CreateVariables() {
  PS_RETURN_IF_ERROR(variables_.Create(options_.placement_policy, job_->seed));
  const std::vector<VariablePlacementEntry> placement = variables_.placement();
  LogInfo(absl::StrCat("placement: ", DescribePolicy(options_.placement_policy), "; ",
                       placement.size(), " shards of ", model_->variables().size(),
                       " variables on ", ps_.size(), " ps"));
  if (options_.consistency.mode() != CONSISTENCY_ASYNC) {
    LogInfo(absl::StrCat("consistency: ", DescribeConsistency(options_.consistency)));
  }
  for (const VariablePlacementEntry& e : placement) {
    LogInfo(absl::StrCat(
        "variable ", e.name(), " ",
        ShapeToString(std::vector<int64_t>(e.shape().begin(), e.shape().end())),
        e.num_shards() > 1 ? absl::StrCat(" (rows ", e.row_offset(), "-",
                                          e.row_offset() + e.num_rows() - 1, " of ",
                                          e.variable_name(), ")")
                           : "",
        " on ps ", e.ps_index()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Coordinator::RestoreCheckpoint(const nlohmann::json** resume) {
  SetPhase(JobPhase::kRestoring);
  PS_RETURN_IF_ERROR(checkpointer_.Restore(*restore_));
  SetPhase(JobPhase::kTraining);
  const int first_epoch = restore_->epoch();
  {
    absl::MutexLock lock(&mu_);
    global_step_ = restore_->step();
    epoch_ = first_epoch;
  }
  checkpointer_.Start(restore_->step());
  // A mid-epoch checkpoint says where the epoch in progress stood.
  *resume = SavedDataPosition(*restore_, first_epoch);
  // A warning, so that ./demo.sh shows it: a user whose chief was restarted sees where
  // training continues from.
  LogWarning(absl::StrCat(
      "restored ", restore_->path(), " (epoch ", restore_->epoch(), ", step ",
      restore_->step(), ") onto ", ps_.size(), " ps",
      first_epoch >= job_->epochs
          ? absl::StrCat("; it already has all ", job_->epochs, " epochs, nothing to train")
          : absl::StrCat("; continuing with epoch ", first_epoch + 1,
                         *resume != nullptr ? " from its saved data positions" : "")));
  return first_epoch;
}

absl::StatusOr<SaveCheckpointResponse> Coordinator::SaveCheckpointNow(absl::Duration timeout) {
  if (!checkpointer_.enabled()) {
    return absl::FailedPreconditionError("this chief has no --checkpoint_dir");
  }
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == JobPhase::kDone || phase_ == JobPhase::kFailed) {
      const std::string last = checkpointer_.last().path();
      return absl::FailedPreconditionError(absl::StrCat(
          "the job is ", phase_ == JobPhase::kDone ? "over" : "failed",
          "; its last checkpoint is ", last.empty() ? "(none)" : last));
    }
    if (phase_ == JobPhase::kWaitingForTasks) {
      return absl::FailedPreconditionError("training has not started: waiting for tasks");
    }
  }
  const int64_t written_before = checkpointer_.Request();
  {
    // In consistent mode the workers' threads stop taking chunks; the epoch loop writes
    // once the chunks in flight are back. Otherwise a worker's thread writes after its
    // next chunk.
    absl::MutexLock lock(&mu_);
    if (running_queue_ != nullptr && options_.consistent_checkpoints) running_queue_->Close();
  }
  return checkpointer_.AwaitWrite(written_before, timeout);
}

bool Coordinator::CheckpointDue() const {
  const int64_t step = global_step();
  return checkpointer_.Due(step) ||
         (preempted() && checkpointer_.enabled() && !checkpointer_.IsCurrent(step));
}

bool Coordinator::Preempt() {
  absl::MutexLock lock(&mu_);
  if (phase_ == JobPhase::kWaitingForTasks || phase_ == JobPhase::kDone ||
      phase_ == JobPhase::kFailed) {
    return false;
  }
  preempted_ = true;
  // The workers' threads take no new chunk; the epoch loop checkpoints and stops once
  // the chunks in flight are back.
  if (running_queue_ != nullptr) running_queue_->Close();
  return true;
}

bool Coordinator::preempted() const {
  absl::MutexLock lock(&mu_);
  return preempted_;
}

absl::Status Coordinator::StopForRestart(int epochs_done) {
  if (CheckpointDue()) {
    PS_RETURN_IF_ERROR(
        RetryAfterPsRecovery([&] { return WriteCheckpoint(epochs_done, nullptr); }));
  }
  return PreemptedStatus();
}

absl::Status Coordinator::PreemptedStatus() const {
  const SaveCheckpointResponse last = checkpointer_.last();
  return absl::AbortedError(absl::StrCat(
      "preempted at step ", global_step(), "; ",
      last.path().empty()
          ? (checkpointer_.enabled() ? std::string("no checkpoint written")
                                     : std::string("no checkpoint (no --checkpoint_dir)"))
          : absl::StrCat("the newest checkpoint is ", last.path(), " (epoch ", last.epoch(),
                         ", step ", last.step(), ")")));
}

absl::Status Coordinator::WriteCheckpoint(int epochs_done, const nlohmann::json* position) {
  return checkpointer_.Write(epochs_done, global_step(), position);
}

absl::Status Coordinator::RetryAfterPsRecovery(const std::function<absl::Status()>& step) {
  absl::Status status = step();
  if (status.ok() || !PsRecovery::IsPsGone(status)) return status;
  LogWarning(absl::StrCat("a ps failed: ", status.message(), "; recovering it"));
  PS_RETURN_IF_ERROR(RecoverPs());
  return step();
}

absl::Status Coordinator::WaitDuringRecovery(absl::Duration timeout) const {
  if (preempted()) return PreemptedStatus();
  if (abort_ == nullptr) {
    absl::SleepFor(timeout);
  } else if (abort_->WaitFor(timeout)) {
    return absl::CancelledError("the chief is shutting down");
  }
  return absl::OkStatus();
}

absl::Status Coordinator::RecoverPs() {
  SetPhase(JobPhase::kRecovering);
  int epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    epoch = epoch_;
  }
  PS_RETURN_IF_ERROR(
      ps_recovery_.Recover(absl::StrCat("training continues in epoch ", epoch)));
  // The ps state may have been replaced: every worker pulls afresh before its next step.
  ++ps_generation_;
  SetPhase(JobPhase::kTraining);
  return absl::OkStatus();
}

absl::Status Coordinator::WaitForWorkersReady() {
  const absl::Time give_up = absl::Now() + options_.register_timeout;
  for (WorkerClient* worker : workers_) {
    while (true) {
      absl::StatusOr<WorkerStatusResponse> status = worker->GetStatus();
      // Busy: it still runs a chunk a previous chief (this one, restarted) gave it.
      if (status.ok() && status->ready() && !status->busy()) break;
      if (absl::Now() >= give_up) {
        return absl::DeadlineExceededError(absl::StrCat(
            worker->name(), " registered but did not become ready (and idle) within ",
            absl::FormatDuration(options_.register_timeout),
            status.ok() ? "" : absl::StrCat(": ", status.status().message())));
      }
      if (abort_ != nullptr && abort_->WaitFor(absl::Milliseconds(50))) {
        return absl::CancelledError("the chief is shutting down");
      }
    }
  }
  return absl::OkStatus();
}

void Coordinator::RejoinLostWorkers(int epoch) {
  std::vector<bool> lost;
  {
    absl::MutexLock lock(&mu_);
    lost = lost_;
  }
  for (size_t w = 0; w < lost.size(); ++w) {
    if (!lost[w]) continue;
    if (!membership_->IsLive({Role::kWorker, static_cast<int>(w)}, options_.rejoin_heartbeat_age)) {
      continue;
    }
    absl::StatusOr<WorkerStatusResponse> status = workers_[w]->GetStatus();
    if (!status.ok() || !status->ready() || status->busy()) continue;
    {
      absl::MutexLock lock(&mu_);
      lost_[w] = false;
    }
    LogWarning(absl::StrCat(workers_[w]->name(), " is back; it trains again from epoch ",
                         epoch + 1));
  }
}

void Coordinator::MarkLost(int w) {
  {
    absl::MutexLock lock(&mu_);
    lost_[w] = true;
  }
  if (options_.observer != nullptr) options_.observer->OnTaskLost("worker", workers_[w]->name());
}

bool Coordinator::EveryWorkerLost() const {
  absl::MutexLock lock(&mu_);
  return std::all_of(lost_.begin(), lost_.end(), [](bool l) { return l; });
}

absl::Status Coordinator::RecoverPsDuringEpoch() {
  const int64_t step = global_step();
  recoveries_without_progress_ =
      step > step_at_last_recovery_ ? 1 : recoveries_without_progress_ + 1;
  step_at_last_recovery_ = step;
  if (recoveries_without_progress_ > kMaxRecoveriesWithoutProgress) {
    return absl::UnavailableError(absl::StrCat("a ps keeps failing: ",
                                               kMaxRecoveriesWithoutProgress,
                                               " recoveries in a row without a step of progress"));
  }
  if (recoveries_without_progress_ > 1) {
    const absl::Duration pause =
        std::min(kFirstRecoveryPause * (1 << (recoveries_without_progress_ - 2)),
                 kMaxRecoveryPause);
    if (abort_ == nullptr) {
      absl::SleepFor(pause);
    } else if (abort_->WaitFor(pause)) {
      return absl::CancelledError("the chief is shutting down");
    }
  }
  PS_RETURN_IF_ERROR(RecoverPs());
  // Training resumes as after any pause: with the lost workers that are back.
  int epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    epoch = epoch_ - 1;
  }
  RejoinLostWorkers(epoch);
  return absl::OkStatus();
}

absl::Status Coordinator::RunChunk(int w, SegmentRun* segment, bool* ran) {
  *ran = false;
  if (abort_ != nullptr && abort_->requested()) {
    segment->Fail(absl::CancelledError("the chief is shutting down"));
    return absl::OkStatus();
  }
  ShardQueue* const queue = segment->queue;
  // Its own shard first, then the one it ran last (its batcher is there), then any.
  std::optional<ShardQueue::Chunk> chunk = queue->Take({w, segment->previous[w]});
  if (!chunk.has_value()) return absl::OkStatus();
  RunStepsRequest request = segment->base;
  request.set_shard_index(chunk->shard);
  request.set_first_step(chunk->first_step);
  request.set_steps(chunk->steps);
  // A ps recovered during the segment (no chunk was in flight then): pull afresh.
  request.set_ps_generation(ps_generation_);
  absl::StatusOr<RunStepsResponse> response = workers_[w]->RunSteps(request);
  if (!response.ok()) {
    // The chunk's answer never came: it runs again from its first step (another worker
    // when this one is lost, any after a ps recovery).
    queue->Return(*chunk);
    switch (distribute::ClassifyFailure(response.status())) {
      case distribute::FailureKind::kFunctionError:
        // A failed epoch stops the other workers after their current chunk.
        queue->Close();
        break;
      case distribute::FailureKind::kWorkerLost: {
        absl::MutexLock lock(&mu_);
        lost_chunks_[{chunk->shard, chunk->first_step}] = workers_[w]->name();
        break;
      }
      default:
        break;
    }
    return response.status();
  }
  std::string lost_by;
  {
    absl::MutexLock lock(&mu_);
    auto lost = lost_chunks_.find({chunk->shard, chunk->first_step});
    if (lost != lost_chunks_.end()) {
      lost_by = lost->second;
      lost_chunks_.erase(lost);
    }
  }
  if (!lost_by.empty()) {
    // Run again from its first step and answered: once, whoever answered.
    LogInfo(absl::StrCat("the chunk of shard ", chunk->shard, " from step ", chunk->first_step,
                         " that ", lost_by, " did not answer ran again on ",
                         workers_[w]->name()));
  }
  queue->Complete(*chunk, response->steps(), response->end_of_data());
  AddFigures(*response, &segment->totals[w]);
  ReportSteps(w, segment->base, *response);
  segment->previous[w] = chunk->shard;
  *ran = true;
  if (CheckpointDue()) {
    const absl::Status written = CheckpointAfterChunk(segment->base, queue);
    if (!written.ok()) segment->Fail(written);
  }
  return absl::OkStatus();
}

void Coordinator::ReportSteps(int w, const RunStepsRequest& base,
                              const RunStepsResponse& response) {
  StepsDone done;
  {
    absl::MutexLock lock(&mu_);
    global_step_ += response.steps();
    steps_per_worker_[w] += response.steps();
    AddFigures(response, &epoch_progress_);
    done.epoch = base.epoch() + 1;
    done.epochs = job_->epochs;
    done.global_step = global_step_;
    done.epoch_step = epoch_progress_.steps();
    done.epoch_steps = std::max(expected_epoch_steps_, done.epoch_step);
    done.epoch_elapsed = absl::Now() - epoch_start_;
    const double seen = static_cast<double>(std::max<int64_t>(epoch_progress_.samples(), 1));
    done.epoch_loss = epoch_progress_.loss_sum() / seen;
    done.epoch_accuracy = static_cast<double>(epoch_progress_.correct()) / seen;
  }
  if (options_.observer == nullptr) return;
  done.steps = response.steps();
  done.samples = response.samples();
  done.loss =
      response.loss_sum() / static_cast<double>(std::max<int64_t>(response.samples(), 1));
  done.worker = w;
  options_.observer->OnSteps(done);
}

absl::Status Coordinator::CheckpointAfterChunk(const RunStepsRequest& base, ShardQueue* queue) {
  if (options_.consistent_checkpoints) {
    // The epoch loop writes it once every chunk in flight is back.
    queue->Close();
    return absl::OkStatus();
  }
  if (live_write_.exchange(true)) return absl::OkStatus();  // another thread writes
  // One worker's thread writes while the others go on pushing. The epoch's figures are
  // those of its earlier segments: the chunks of this one are still counted by their
  // threads.
  const nlohmann::json position =
      DataPosition(base.epoch(), base.batch_size(), *queue, *segment_start_figures_);
  const absl::Status written = WriteCheckpoint(base.epoch(), &position);
  live_write_ = false;
  return written;
}

RunStepsRequest Coordinator::EpochRequest(int epoch) const {
  RunStepsRequest base;
  base.set_epoch(epoch);
  base.set_batch_size(job_->batch_size);
  base.set_num_shards(static_cast<int>(workers_.size()));
  for (const VariablePlacementEntry& e : variables_.placement()) *base.add_placement() = e;
  for (const std::string& address : options_.ps_addresses) base.add_ps_addresses(address);
  return base;
}

absl::Status Coordinator::RunSegment(const RunStepsRequest& base, ShardQueue* queue,
                                     RunStepsResponse* epoch_figures) {
  const int num_workers = static_cast<int>(workers_.size());
  SegmentRun segment(base, queue, num_workers);
  segment_start_figures_ = epoch_figures;
  int live = 0;
  {
    absl::MutexLock lock(&mu_);
    running_queue_ = queue;
    // A request (or a preemption) that came between segments pauses this one at its
    // first chunk.
    if ((options_.consistent_checkpoints && checkpointer_.Requested()) || preempted_) {
      queue->Close();
    }
    live = static_cast<int>(std::count(lost_.begin(), lost_.end(), false));
  }
  // One chunk per live worker at a time: each queues its successor (ChunkClosure).
  for (int i = 0; i < live; ++i) {
    scheduler_->Schedule(std::make_shared<ChunkClosure>(this, &segment));
  }
  const absl::Status joined = scheduler_->Join();
  {
    absl::MutexLock lock(&mu_);
    running_queue_ = nullptr;
  }
  for (int w = 0; w < num_workers; ++w) AddFigures(segment.totals[w], epoch_figures);
  PS_RETURN_IF_ERROR(segment.TakeError());
  // With every worker lost the chunks left could not run: the epoch loop names them.
  if (!joined.ok() && !EveryWorkerLost()) return joined;
  return absl::OkStatus();
}

absl::Status Coordinator::RunEpoch(int epoch, EpochSummary* summary,
                                   const nlohmann::json* resume) {
  const int num_workers = static_cast<int>(workers_.size());
  // With steps_per_epoch (global steps, as Keras counts them) each shard runs its share
  // over repeating data; without it each shard is one pass over its data.
  const int64_t budget =
      job_->steps_per_epoch > 0
          ? std::max<int64_t>(1, (job_->steps_per_epoch + num_workers - 1) / num_workers)
          : -1;
  ShardQueue queue(num_workers, options_.steps_per_call, budget);
  // The figures of every chunk acknowledged so far this epoch (of earlier segments).
  RunStepsResponse epoch_figures;
  if (resume != nullptr) {
    // All or nothing: a position that does not fit leaves the queue and figures as new.
    const absl::Status fits = ResumeFrom(*resume, job_->batch_size, &queue, &epoch_figures);
    if (!fits.ok()) {
      LogInfo(absl::StrCat("the checkpoint's data positions do not fit this job (",
                           fits.message(), "); epoch ", epoch + 1, " starts from its beginning"));
    }
  }
  RunStepsRequest base = EpochRequest(epoch);
  {
    absl::MutexLock lock(&mu_);
    epoch_start_ = absl::Now();
    epoch_progress_ = epoch_figures;
    if (job_->steps_per_epoch > 0) expected_epoch_steps_ = job_->steps_per_epoch;
  }

  // The epoch runs in segments: all live workers take chunks until the queue is done or
  // paused for a checkpoint (a failed ps is recovered within the segment, by the
  // scheduler's recover_ps); between segments the chief writes the checkpoint, then
  // reopens the queue.
  recoveries_without_progress_ = 0;
  step_at_last_recovery_ = global_step();
  {
    absl::MutexLock lock(&mu_);
    lost_chunks_.clear();
  }
  while (true) {
    RejoinLostWorkers(epoch);
    base.set_ps_generation(ps_generation_);
    PS_RETURN_IF_ERROR(RunSegment(base, &queue, &epoch_figures));
    if (queue.Done()) break;
    if (EveryWorkerLost()) {
      std::vector<std::string> names;
      for (int w = 0; w < num_workers; ++w) names.push_back(workers_[w]->name());
      return absl::UnavailableError(absl::StrCat("epoch ", epoch + 1,
                                                 " cannot finish: every worker is lost (",
                                                 absl::StrJoin(names, ", "), ")"));
    }
    if (CheckpointDue()) {
      // Paused with no chunk in flight: every shard belongs to one step.
      const nlohmann::json position =
          DataPosition(epoch, job_->batch_size, queue, epoch_figures);
      PS_RETURN_IF_ERROR(
          RetryAfterPsRecovery([&] { return WriteCheckpoint(epoch, &position); }));
    }
    if (preempted()) return PreemptedStatus();
    queue.Reopen();
  }
  if (epoch_figures.samples() == 0) {
    return absl::FailedPreconditionError("an epoch trained on no examples");
  }
  summary->loss = epoch_figures.loss_sum() / epoch_figures.samples();
  summary->accuracy = static_cast<double>(epoch_figures.correct()) / epoch_figures.samples();
  summary->samples = epoch_figures.samples();
  summary->steps = epoch_figures.steps();
  {
    absl::MutexLock lock(&mu_);
    // The next epoch's progress bar counts towards this many steps.
    if (job_->steps_per_epoch <= 0) expected_epoch_steps_ = epoch_figures.steps();
  }
  return absl::OkStatus();
}

absl::Status Coordinator::Validate(EpochSummary* summary) {
  PS_ASSIGN_OR_RETURN(EvaluationResult result,
                      evaluator_.Evaluate(*validation_, kValidationBatch));
  if (result.samples > 0) {
    summary->has_validation = true;
    summary->val_loss = result.loss;
    summary->val_accuracy = result.accuracy;
  }
  return absl::OkStatus();
}

}  // namespace pstrain
