#include "chief/coordinator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "chief/placement.h"
#include "common/sharding/shards_by_ps.h"
#include "common/training/consistency_config.h"

namespace pstrain {

namespace {

// obj[key] when obj is an object holding a number there, else `fallback`: checkpoint
// metadata is read from disk, and json::value would throw on another type.
int64_t IntegerOr(const nlohmann::json& obj, const char* key, int64_t fallback) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer()) return fallback;
  return obj[key].get<int64_t>();
}
double NumberOr(const nlohmann::json& obj, const char* key, double fallback) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return fallback;
  return obj[key].get<double>();
}

}  // namespace

Coordinator::Coordinator(Options options, const JobSpec* job, Model* model,
                         Membership* membership, std::vector<PsClient*> ps,
                         std::vector<WorkerClient*> workers, const Dataset* validation,
                         const ShutdownSignal* abort,
                         std::function<void(const EpochSummary&)> on_epoch,
                         const CheckpointReader* restore)
    : options_(options),
      job_(job),
      model_(model),
      membership_(membership),
      ps_(std::move(ps)),
      workers_(std::move(workers)),
      validation_(validation),
      abort_(abort),
      on_epoch_(std::move(on_epoch)),
      restore_(restore) {
  if (!options_.checkpoint_dir.empty()) {
    CheckpointWriter::Options writer_options;
    writer_options.keep = options_.keep_checkpoints;
    writer_options.delay_before_commit = options_.checkpoint_commit_delay;
    writer_ = std::make_unique<CheckpointWriter>(options_.checkpoint_dir, writer_options);
  }
}

void Coordinator::SetPhase(const std::string& phase) {
  absl::MutexLock lock(&mu_);
  phase_ = phase;
}

void Coordinator::Describe(ChiefStatusResponse* response) const {
  absl::MutexLock lock(&mu_);
  response->set_phase(phase_);
  response->set_epoch(epoch_);
  response->set_global_step(global_step_);
  for (const VariablePlacementEntry& e : placement_) *response->add_placement() = e;
}

absl::Status Coordinator::Run() {
  ps_generation_ = absl::ToUnixNanos(absl::Now());
  {
    absl::MutexLock lock(&mu_);
    last_checkpoint_time_ = absl::Now();
  }
  absl::Status status = [&]() -> absl::Status {
    PS_RETURN_IF_ERROR(membership_->WaitForAll(options_.register_timeout, abort_));
    LogInfo(absl::StrCat("all ", ps_.size(), " ps and ", workers_.size(),
                         " worker tasks registered"));
    PS_RETURN_IF_ERROR(WaitForWorkersReady());
    PS_RETURN_IF_ERROR(CreateVariables());
    SetPhase("training");
    for (const VariablePlacementEntry& e : placement_) {
      LogInfo(absl::StrCat(
          "variable ", e.name(), " ",
          ShapeToString(std::vector<int64_t>(e.shape().begin(), e.shape().end())),
          e.num_shards() > 1 ? absl::StrCat(" (rows ", e.row_offset(), "-",
                                            e.row_offset() + e.num_rows() - 1, " of ",
                                            e.variable_name(), ")")
                             : "",
          " on ps ", e.ps_index()));
    }
    int first_epoch = 0;
    const nlohmann::json* resume = nullptr;
    if (restore_ != nullptr) {
      SetPhase("restoring");
      PS_RETURN_IF_ERROR(RestoreCheckpoint());
      SetPhase("training");
      first_epoch = restore_->epoch();
      {
        absl::MutexLock lock(&mu_);
        global_step_ = restore_->step();
        last_checkpoint_step_ = restore_->step();
        epoch_ = first_epoch;
      }
      // A mid-epoch checkpoint says where the epoch in progress stood.
      const nlohmann::json& metadata = restore_->metadata();
      if (metadata.is_object() && metadata.contains("data_position") &&
          metadata["data_position"].is_object() &&
          IntegerOr(metadata["data_position"], "epoch", -1) == first_epoch) {
        resume = &metadata["data_position"];
      }
      LogInfo(absl::StrCat(
          "restored ", restore_->path(), " (epoch ", restore_->epoch(), ", step ",
          restore_->step(), ") onto ", ps_.size(), " ps",
          first_epoch >= job_->epochs
              ? absl::StrCat("; it already has all ", job_->epochs, " epochs, nothing to train")
              : absl::StrCat("; continuing with epoch ", first_epoch + 1,
                             resume != nullptr ? " from its saved data positions" : "")));
    }
    for (int epoch = first_epoch; epoch < job_->epochs; ++epoch) {
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
      if (writer_ != nullptr && (last || options_.checkpoint_every_epoch || CheckpointDue())) {
        PS_RETURN_IF_ERROR(
            RetryAfterPsRecovery([&] { return WriteCheckpoint(epoch + 1, nullptr); }));
      }
    }
    return absl::OkStatus();
  }();
  SetPhase(status.ok() ? "done" : "failed");
  return status;
}

absl::StatusOr<SaveCheckpointResponse> Coordinator::SaveCheckpointNow(absl::Duration timeout) {
  if (writer_ == nullptr) {
    return absl::FailedPreconditionError("this chief has no --checkpoint_dir");
  }
  absl::MutexLock lock(&mu_);
  if (phase_ == "done" || phase_ == "failed") {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job is ", phase_ == "done" ? "over" : "failed", "; its last checkpoint is ",
        last_checkpoint_.path().empty() ? "(none)" : last_checkpoint_.path()));
  }
  if (phase_ == "waiting_for_tasks") {
    return absl::FailedPreconditionError("training has not started: waiting for tasks");
  }
  const int64_t before = checkpoints_written_;
  checkpoint_requested_ = true;
  // In consistent mode the workers' threads stop taking chunks; the epoch loop writes
  // once the chunks in flight are back. Otherwise a worker's thread writes after its
  // next chunk.
  if (running_queue_ != nullptr && options_.consistent_checkpoints) running_queue_->Close();
  auto written_or_over = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return checkpoints_written_ > before || phase_ == "done" || phase_ == "failed";
  };
  mu_.AwaitWithTimeout(absl::Condition(&written_or_over), timeout);
  if (checkpoints_written_ > before) return last_checkpoint_;
  if (phase_ == "failed") {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job failed before the checkpoint was written",
        last_checkpoint_status_.ok() ? "" : absl::StrCat(": ", last_checkpoint_status_.message())));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no checkpoint written within ", absl::FormatDuration(timeout),
      "; the request stays pending and is served at the next chunk boundary"));
}

bool Coordinator::CheckpointDue() const {
  if (writer_ == nullptr) return false;
  absl::MutexLock lock(&mu_);
  if (checkpoint_requested_) return true;
  if (options_.checkpoint_every_steps > 0 &&
      global_step_ - last_checkpoint_step_ >= options_.checkpoint_every_steps) {
    return true;
  }
  return options_.checkpoint_every > absl::ZeroDuration() &&
         absl::Now() - last_checkpoint_time_ >= options_.checkpoint_every;
}

namespace {

// A ps call failed because the ps is gone (or came back empty after a restart: NOT_FOUND
// a variable, FAILED_PRECONDITION no variables at all), as opposed to a bad request:
// recovering the ps may help.
bool IsPsGone(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsNotFound(status) || absl::IsFailedPrecondition(status) ||
         absl::IsAborted(status);
}

}  // namespace

absl::Status Coordinator::RetryAfterPsRecovery(const std::function<absl::Status()>& step) {
  absl::Status status = step();
  if (status.ok() || !IsPsGone(status)) return status;
  LogWarning(absl::StrCat("a ps failed: ", status.message(), "; recovering it"));
  PS_RETURN_IF_ERROR(RecoverPs());
  return step();
}

OptimizerConfig Coordinator::PsOptimizer() const {
  // Every worker pushes its own batch's gradient: with scale_learning_rate the rate grows
  // with the global batch (per-replica batch x workers), the seed's best practice.
  OptimizerConfig optimizer = job_->optimizer;
  if (job_->scale_learning_rate) {
    optimizer.set_learning_rate(optimizer.learning_rate() * static_cast<float>(workers_.size()));
  }
  return optimizer;
}

absl::Status Coordinator::RecoverPs() {
  SetPhase("recovering");
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, CurrentLayout());
  // The shards each ps must hold.
  const std::vector<std::vector<ShardRef>> expected =
      ShardsByPs(layout, static_cast<int>(ps_.size()));
  const absl::Time give_up = absl::Now() + options_.ps_recovery_timeout;
  std::vector<int> emptied;
  while (true) {
    emptied.clear();
    std::vector<std::string> missing;
    for (size_t p = 0; p < ps_.size(); ++p) {
      absl::StatusOr<PsStatusResponse> status = ps_[p]->GetStatus();
      if (!status.ok()) {
        missing.push_back(std::string(status.status().message()));
        continue;
      }
      absl::flat_hash_set<std::string> held;
      for (const VariableInfo& v : status->variables()) held.insert(v.name());
      for (const ShardRef& shard : expected[p]) {
        if (!held.contains(shard.entry.name())) {
          emptied.push_back(static_cast<int>(p));
          break;
        }
      }
    }
    if (missing.empty()) break;
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(absl::StrCat(
          "training paused for a failed ps, which did not come back within ",
          absl::FormatDuration(options_.ps_recovery_timeout), ": ", absl::StrJoin(missing, "; ")));
    }
    if (abort_ != nullptr && abort_->WaitFor(absl::Milliseconds(250))) {
      return absl::CancelledError("the chief is shutting down");
    }
    if (abort_ == nullptr) absl::SleepFor(absl::Milliseconds(250));
  }
  ++ps_generation_;
  if (options_.observer != nullptr) options_.observer->OnPsRecovered();
  if (emptied.empty()) {
    LogWarning("every ps answers and holds its variables; training resumes");
    SetPhase("training");
    return absl::OkStatus();
  }
  // The newest good checkpoint of this job (a corrupt newest one is reported and skipped),
  // else the one this run was restored from.
  std::unique_ptr<CheckpointReader> latest;
  const CheckpointReader* checkpoint = restore_;
  if (writer_ != nullptr) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> opened =
        CheckpointReader::Open(options_.checkpoint_dir);
    if (opened.ok()) {
      latest = *std::move(opened);
      checkpoint = latest.get();
    } else if (!absl::IsNotFound(opened.status())) {
      LogError(absl::StrCat("cannot read a checkpoint to recover from: ",
                            opened.status().message()));
    }
  }
  // Each emptied ps's shards are created from the checkpoint's values (its slots and
  // counts restored next), or from the initial values when there is no checkpoint.
  std::vector<std::vector<VariableSnapshot>> saved(ps_.size());
  std::vector<std::vector<NamedTensor>> initial(ps_.size());
  if (checkpoint != nullptr) {
    PS_ASSIGN_OR_RETURN(saved, SnapshotsFrom(*checkpoint, layout));
  } else {
    PS_ASSIGN_OR_RETURN(initial, InitialShardsByPs(layout));
  }
  for (int p : emptied) {
    std::vector<NamedTensor> shards = std::move(initial[p]);
    for (const VariableSnapshot& s : saved[p]) shards.push_back({s.name, s.value});
    PS_RETURN_IF_ERROR(ps_[p]->CreateVariables(std::move(shards), PsOptimizer(),
                                               options_.consistency));
    if (checkpoint != nullptr) PS_RETURN_IF_ERROR(ps_[p]->RestoreState(saved[p]));
    LogWarning(checkpoint != nullptr
                   ? absl::StrCat(ps_[p]->name(), " came back empty; its shards restored from ",
                                  checkpoint->path(), " (step ", checkpoint->step(), ")")
                   : absl::StrCat(ps_[p]->name(), " came back empty and no checkpoint exists "
                                  "yet; its shards start again from their initial values"));
  }
  SetPhase("training");
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

absl::StatusOr<std::vector<std::vector<NamedTensor>>> Coordinator::InitialShardsByPs(
    const std::vector<VariableLayout>& layout) const {
  return ScatterValues(layout, static_cast<int>(ps_.size()), model_->InitialValues(job_->seed));
}

absl::Status Coordinator::CreateVariables() {
  std::vector<VariableShape> shapes;
  for (const VariableSpec& spec : model_->variables()) {
    shapes.push_back({spec.name, spec.shape});
  }
  const int num_ps = static_cast<int>(ps_.size());
  PS_ASSIGN_OR_RETURN(std::vector<VariablePlacementEntry> placement,
                      PlaceVariables(shapes, num_ps, options_.placement_policy));
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout,
                      ResolveLayout(shapes, placement, num_ps));
  PS_ASSIGN_OR_RETURN(std::vector<std::vector<NamedTensor>> per_ps, InitialShardsByPs(layout));
  const OptimizerConfig optimizer = PsOptimizer();
  std::vector<std::function<absl::Status()>> creates;
  for (size_t p = 0; p < ps_.size(); ++p) {
    creates.push_back([this, p, &per_ps, &optimizer] {
      return ps_[p]->CreateVariables(std::move(per_ps[p]), optimizer, options_.consistency);
    });
  }
  PS_RETURN_IF_ERROR(RunConcurrently(creates));
  LogInfo(absl::StrCat("placement: ", DescribePolicy(options_.placement_policy), "; ",
                       placement.size(), " shards of ", shapes.size(), " variables on ",
                       num_ps, " ps"));
  if (options_.consistency.mode() != CONSISTENCY_ASYNC) {
    LogInfo(absl::StrCat("consistency: ", DescribeConsistency(options_.consistency)));
  }
  absl::MutexLock lock(&mu_);
  placement_ = std::move(placement);
  return absl::OkStatus();
}

void Coordinator::RejoinLostWorkers(int epoch) {
  for (size_t w = 0; w < lost_.size(); ++w) {
    if (!lost_[w]) continue;
    if (!membership_->IsLive("worker", static_cast<int>(w), options_.rejoin_heartbeat_age)) {
      continue;
    }
    absl::StatusOr<WorkerStatusResponse> status = workers_[w]->GetStatus();
    if (!status.ok() || !status->ready() || status->busy()) continue;
    lost_[w] = false;
    LogWarning(absl::StrCat(workers_[w]->name(), " is back; it trains again from epoch ",
                         epoch + 1));
  }
}

namespace {

void AddFigures(const RunStepsResponse& from, RunStepsResponse* to) {
  to->set_loss_sum(to->loss_sum() + from.loss_sum());
  to->set_correct(to->correct() + from.correct());
  to->set_samples(to->samples() + from.samples());
  to->set_steps(to->steps() + from.steps());
}

// Where epoch `epoch` (0-based, in progress) stands, for a mid-epoch checkpoint: each
// shard's next step and whether it is done, and the epoch's figures so far.
nlohmann::json DataPosition(int epoch, int32_t batch_size, const ShardQueue& queue,
                            const RunStepsResponse& figures) {
  nlohmann::json next = nlohmann::json::array();
  nlohmann::json finished = nlohmann::json::array();
  for (const ShardQueue::Position& p : queue.Positions()) {
    next.push_back(p.next_step);
    finished.push_back(p.finished);
  }
  return {{"epoch", epoch},
          {"batch_size", batch_size},
          {"num_shards", next.size()},
          {"next_step", std::move(next)},
          {"finished", std::move(finished)},
          {"loss_sum", figures.loss_sum()},
          {"correct", figures.correct()},
          {"samples", figures.samples()},
          {"steps", figures.steps()}};
}

// Puts `queue` and `figures` where `position` (DataPosition's) says. All or nothing.
// Errors: INVALID_ARGUMENT a malformed position, or one of another batch size or number
//         of shards (it would name other batches).
absl::Status ResumeFrom(const nlohmann::json& position, int32_t batch_size, ShardQueue* queue,
                        RunStepsResponse* figures) {
  if (!position.is_object() || !position.contains("next_step") ||
      !position["next_step"].is_array() || !position.contains("finished") ||
      !position["finished"].is_array() ||
      position["next_step"].size() != position["finished"].size()) {
    return absl::InvalidArgumentError("malformed data position");
  }
  if (IntegerOr(position, "batch_size", -1) != batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("saved with batch size ",
                                                   IntegerOr(position, "batch_size", -1),
                                                   ", the job now has ", batch_size));
  }
  std::vector<ShardQueue::Position> positions;
  for (size_t i = 0; i < position["next_step"].size(); ++i) {
    const nlohmann::json& next = position["next_step"][i];
    const nlohmann::json& done = position["finished"][i];
    if (!next.is_number_integer() || !done.is_boolean()) {
      return absl::InvalidArgumentError("malformed data position");
    }
    positions.push_back({next.get<int64_t>(), done.get<bool>()});
  }
  PS_RETURN_IF_ERROR(queue->Resume(positions));
  figures->set_loss_sum(NumberOr(position, "loss_sum", 0.0));
  figures->set_correct(IntegerOr(position, "correct", 0));
  figures->set_samples(IntegerOr(position, "samples", 0));
  figures->set_steps(IntegerOr(position, "steps", 0));
  return absl::OkStatus();
}

}  // namespace

absl::Status Coordinator::RunChunks(int w, const RunStepsRequest& base, ShardQueue* queue,
                                    RunStepsResponse* total, bool* lost, bool* ps_failed) {
  int previous = w;
  while (true) {
    if (abort_ != nullptr && abort_->requested()) {
      return absl::CancelledError("the chief is shutting down");
    }
    // Its own shard first, then the one it ran last (its batcher is there), then any.
    std::optional<ShardQueue::Chunk> chunk = queue->Take({w, previous});
    if (!chunk.has_value()) return absl::OkStatus();
    RunStepsRequest request = base;
    request.set_shard_index(chunk->shard);
    request.set_first_step(chunk->first_step);
    request.set_steps(chunk->steps);
    absl::StatusOr<RunStepsResponse> response = workers_[w]->RunSteps(request);
    if (!response.ok()) {
      // The chunk's answer never came: another worker runs it again from its first step.
      queue->Return(*chunk);
      const std::string name = workers_[w]->name();
      if (absl::IsAborted(response.status())) {
        // The worker is fine but a ps is not: everyone stops after their chunk, and the
        // epoch loop recovers the ps before handing out more.
        *ps_failed = true;
        queue->Close();
        LogWarning(absl::StrCat(absl::StripPrefix(response.status().message(), name + ": "),
                                " (reported by ", name, "); training pauses"));
        return absl::OkStatus();
      }
      if (!absl::IsUnavailable(response.status()) &&
          !absl::IsDeadlineExceeded(response.status())) {
        return response.status();
      }
      *lost = true;
      if (options_.observer != nullptr) options_.observer->OnTaskLost("worker", name);
      LogWarning(absl::StrCat(name, " lost: ",
                              absl::StripPrefix(response.status().message(), name + ": "),
                              "; its shard goes to the others"));
      return absl::OkStatus();
    }
    queue->Complete(*chunk, response->steps(), response->end_of_data());
    AddFigures(*response, total);
    StepsDone done;
    {
      absl::MutexLock lock(&mu_);
      global_step_ += response->steps();
      AddFigures(*response, &epoch_progress_);
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
    if (options_.observer != nullptr) {
      done.steps = response->steps();
      done.samples = response->samples();
      done.loss = response->loss_sum() / static_cast<double>(std::max<int64_t>(response->samples(), 1));
      done.worker = w;
      options_.observer->OnSteps(done);
    }
    previous = chunk->shard;
    if (CheckpointDue()) {
      if (options_.consistent_checkpoints) {
        // The epoch loop writes it once every chunk in flight is back.
        queue->Close();
      } else if (!live_write_.exchange(true)) {
        // One worker's thread writes while the others go on pushing. The epoch's figures
        // are those of its earlier segments: the chunks of this one are still counted
        // by their threads.
        const nlohmann::json position =
            DataPosition(base.epoch(), base.batch_size(), *queue, *segment_start_figures_);
        const absl::Status written = WriteCheckpoint(base.epoch(), &position);
        live_write_ = false;
        if (!written.ok()) return written;
      }
    }
  }
}

absl::Status Coordinator::RunEpoch(int epoch, EpochSummary* summary,
                                   const nlohmann::json* resume) {
  const int num_workers = static_cast<int>(workers_.size());
  lost_.resize(num_workers, false);
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
  RunStepsRequest base;
  base.set_epoch(epoch);
  base.set_batch_size(job_->batch_size);
  base.set_num_shards(num_workers);
  {
    absl::MutexLock lock(&mu_);
    for (const VariablePlacementEntry& e : placement_) *base.add_placement() = e;
    epoch_start_ = absl::Now();
    epoch_progress_ = epoch_figures;
    if (job_->steps_per_epoch > 0) expected_epoch_steps_ = job_->steps_per_epoch;
  }
  for (const std::string& address : options_.ps_addresses) base.add_ps_addresses(address);

  // The epoch runs in segments: all live workers take chunks until the queue is done or
  // paused (a checkpoint is due, or a ps failed); between segments the chief writes the
  // checkpoint or recovers the ps, then reopens the queue.
  int recoveries_without_progress = 0;
  while (true) {
    RejoinLostWorkers(epoch);
    base.set_ps_generation(ps_generation_);
    std::vector<RunStepsResponse> totals(num_workers);
    // Not std::vector<bool>: each thread writes its own element.
    std::vector<char> lost_now(num_workers, 0);
    std::vector<char> ps_failed_now(num_workers, 0);
    std::vector<std::function<absl::Status()>> runs;
    for (int w = 0; w < num_workers; ++w) {
      if (lost_[w]) continue;
      runs.push_back([this, w, &base, &queue, &totals, &lost_now, &ps_failed_now]() {
        bool lost = false;
        bool ps_failed = false;
        absl::Status status = RunChunks(w, base, &queue, &totals[w], &lost, &ps_failed);
        lost_now[w] = lost ? 1 : 0;
        ps_failed_now[w] = ps_failed ? 1 : 0;
        // A failed epoch stops the other workers' threads after their current chunk.
        if (!status.ok()) queue.Close();
        return status;
      });
    }
    segment_start_figures_ = &epoch_figures;
    {
      absl::MutexLock lock(&mu_);
      running_queue_ = &queue;
      // A request that came between segments pauses this one at its first chunk.
      if (checkpoint_requested_ && options_.consistent_checkpoints) queue.Close();
    }
    const absl::Status status = RunConcurrently(runs);
    {
      absl::MutexLock lock(&mu_);
      running_queue_ = nullptr;
    }
    int64_t steps_this_segment = 0;
    for (int w = 0; w < num_workers; ++w) {
      if (lost_now[w]) lost_[w] = true;
      AddFigures(totals[w], &epoch_figures);
      steps_this_segment += totals[w].steps();
    }
    PS_RETURN_IF_ERROR(status);
    if (std::any_of(ps_failed_now.begin(), ps_failed_now.end(), [](char f) { return f != 0; })) {
      recoveries_without_progress = steps_this_segment > 0 ? 1 : recoveries_without_progress + 1;
      if (recoveries_without_progress > 3) {
        return absl::UnavailableError(
            "a ps keeps failing: 3 recoveries in a row without a step of progress");
      }
      PS_RETURN_IF_ERROR(RecoverPs());
      queue.Reopen();
      continue;
    }
    if (queue.Done()) break;
    if (std::all_of(lost_.begin(), lost_.end(), [](bool l) { return l; })) {
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

absl::StatusOr<std::vector<VariableLayout>> Coordinator::CurrentLayout() const {
  std::vector<VariablePlacementEntry> placement;
  {
    absl::MutexLock lock(&mu_);
    placement = placement_;
  }
  std::vector<VariableShape> shapes;
  for (const VariableSpec& spec : model_->variables()) {
    shapes.push_back({spec.name, spec.shape});
  }
  return ResolveLayout(shapes, placement, static_cast<int>(ps_.size()));
}

namespace {

// Checkpoint tensor name of a variable's optimizer slot.
std::string SlotTensorName(const std::string& variable, const std::string& slot) {
  return absl::StrCat(variable, "/optimizer/", slot);
}

}  // namespace

absl::Status Coordinator::WriteCheckpoint(int epochs_done, const nlohmann::json* position) {
  absl::MutexLock write_lock(&write_mu_);
  const absl::Time start = absl::Now();
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, CurrentLayout());
  // Every variable's state, reassembled from the shards read from every ps at once.
  PS_ASSIGN_OR_RETURN(
      std::vector<VariableSnapshot> states,
      GatherStates(layout, static_cast<int>(ps_.size()),
                   [this](int p, const std::vector<std::string>& names) {
                     return ps_[p]->ReadState(names);
                   }));

  CheckpointContents contents;
  {
    absl::MutexLock lock(&mu_);
    contents.step = global_step_;
  }
  contents.epoch = epochs_done;
  contents.job_spec = nlohmann::json::parse(SerializeJobSpec(*job_), nullptr,
                                            /*allow_exceptions=*/false);
  contents.metadata = options_.checkpoint_metadata.is_object() ? options_.checkpoint_metadata
                                                               : nlohmann::json::object();
  contents.metadata["global_step"] = contents.step;
  contents.metadata["epochs_done"] = epochs_done;
  contents.metadata["num_ps"] = ps_.size();
  contents.metadata["optimizer"] = job_->optimizer.name();
  if (position != nullptr) contents.metadata["data_position"] = *position;
  nlohmann::json variables = nlohmann::json::object();
  for (size_t i = 0; i < layout.size(); ++i) {
    VariableSnapshot& v = states[i];
    nlohmann::json slot_names = nlohmann::json::array();
    for (const NamedTensor& slot : v.slots) slot_names.push_back(slot.name);
    variables[v.name] = {{"shape", layout[i].shape},
                         {"iterations", v.iterations},
                         {"version", v.version},
                         {"slots", slot_names},
                         {"num_shards", layout[i].shards.size()}};
    contents.tensors.push_back({v.name, std::move(v.value)});
    for (NamedTensor& slot : v.slots) {
      contents.tensors.push_back({SlotTensorName(v.name, slot.name), std::move(slot.tensor)});
    }
  }
  contents.metadata["variables"] = std::move(variables);
  LogInfo(absl::StrCat("writing checkpoint of step ", contents.step, " to ",
                       writer_->root()));
  absl::StatusOr<std::string> path = writer_->Write(contents);
  if (options_.observer != nullptr) {
    CheckpointEvent event;
    event.ok = path.ok();
    if (path.ok()) event.path = *path;
    event.error = std::string(path.status().message());
    event.step = contents.step;
    event.epoch = epochs_done;
    event.took = absl::Now() - start;
    options_.observer->OnCheckpoint(event);
  }
  absl::MutexLock lock(&mu_);
  last_checkpoint_status_ = path.status();
  if (!path.ok()) return path.status();
  LogInfo(absl::StrCat("checkpoint ", *path, " written (epoch ", epochs_done,
                       position != nullptr
                           ? absl::StrCat(" and ", IntegerOr(*position, "steps", 0),
                                          " steps of epoch ", epochs_done + 1)
                           : "",
                       ", step ", contents.step, ")"));
  last_checkpoint_time_ = absl::Now();
  last_checkpoint_step_ = contents.step;
  checkpoint_requested_ = false;
  ++checkpoints_written_;
  last_checkpoint_.set_path(*path);
  last_checkpoint_.set_step(contents.step);
  last_checkpoint_.set_epoch(epochs_done);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<VariableSnapshot>>> Coordinator::SnapshotsFrom(
    const CheckpointReader& checkpoint, const std::vector<VariableLayout>& layout) const {
  const nlohmann::json& info = checkpoint.metadata().contains("variables")
                                   ? checkpoint.metadata()["variables"]
                                   : nlohmann::json::object();
  std::vector<VariableSnapshot> states;
  for (const VariableLayout& v : layout) {
    absl::StatusOr<const Tensor*> value = checkpoint.Get(v.name);
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", checkpoint.path(), " does not fit the model: no variable ", v.name));
    }
    if ((*value)->shape() != v.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", checkpoint.path(), " does not fit the model: ", v.name, " is ",
          (*value)->ShapeString(), " there, ", ShapeToString(v.shape), " in the model"));
    }
    VariableSnapshot state;
    state.name = v.name;
    state.value = **value;
    if (info.is_object() && info.contains(v.name) && info[v.name].is_object()) {
      const nlohmann::json& entry = info[v.name];
      state.iterations = IntegerOr(entry, "iterations", 0);
      state.version = IntegerOr(entry, "version", 0);
      if (entry.contains("slots") && entry["slots"].is_array()) {
        for (const nlohmann::json& slot : entry["slots"]) {
          if (!slot.is_string()) continue;
          PS_ASSIGN_OR_RETURN(const Tensor* t,
                              checkpoint.Get(SlotTensorName(v.name, slot.get<std::string>())));
          if (t->shape() != v.shape) {
            return absl::InvalidArgumentError(absl::StrCat(
                "checkpoint ", checkpoint.path(), ": slot ", slot.get<std::string>(), " of ",
                v.name, " has shape ", t->ShapeString()));
          }
          state.slots.push_back({slot.get<std::string>(), *t});
        }
      }
    }
    states.push_back(std::move(state));
  }
  return ScatterStates(layout, static_cast<int>(ps_.size()), states);
}

absl::Status Coordinator::RestoreCheckpoint() {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, CurrentLayout());
  PS_ASSIGN_OR_RETURN(std::vector<std::vector<VariableSnapshot>> per_ps,
                      SnapshotsFrom(*restore_, layout));
  std::vector<std::function<absl::Status()>> restores;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (per_ps[p].empty()) continue;
    restores.push_back([this, p, &per_ps] { return ps_[p]->RestoreState(per_ps[p]); });
  }
  return RunConcurrently(restores);
}

absl::Status Coordinator::Validate(EpochSummary* summary) {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, CurrentLayout());
  PS_ASSIGN_OR_RETURN(std::vector<Tensor> weights,
                      GatherValues(layout, static_cast<int>(ps_.size()),
                                   [this](int p, const std::vector<std::string>& names) {
                                     return ps_[p]->Pull(names);
                                   }));
  constexpr int64_t kEvalBatch = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t samples = 0;
  for (int64_t start = 0; start < validation_->num_examples(); start += kEvalBatch) {
    const int64_t count = std::min(kEvalBatch, validation_->num_examples() - start);
    PS_ASSIGN_OR_RETURN(Dataset slice, validation_->Slice(start, count));
    PS_ASSIGN_OR_RETURN(StepResult r, model_->Evaluate(weights, slice.x, slice.y));
    loss_sum += r.loss_sum;
    correct += r.correct;
    samples += r.samples;
  }
  if (samples > 0) {
    summary->has_validation = true;
    summary->val_loss = loss_sum / samples;
    summary->val_accuracy = static_cast<double>(correct) / samples;
  }
  return absl::OkStatus();
}

}  // namespace pstrain
