#include "ps_server/client/checkpointer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/training/training_state.h"

namespace pstrain {

Checkpointer::Checkpointer(Options options, const JobSpec* job,
                           const ShardedVariables* variables)
    : options_(std::move(options)), job_(job), variables_(variables) {
  if (!options_.dir.empty()) {
    CheckpointWriter::Options writer_options;
    writer_options.keep = options_.keep;
    writer_options.delay_before_commit = options_.commit_delay;
    writer_ = std::make_unique<CheckpointWriter>(options_.dir, writer_options);
  }
  absl::MutexLock lock(&mu_);
  last_time_ = absl::Now();
}

void Checkpointer::Start(int64_t global_step) {
  absl::MutexLock lock(&mu_);
  last_time_ = absl::Now();
  last_step_ = global_step;
}

bool Checkpointer::Due(int64_t global_step) const {
  if (!enabled()) return false;
  absl::MutexLock lock(&mu_);
  if (requested_) return true;
  if (options_.every_steps > 0 && global_step - last_step_ >= options_.every_steps) return true;
  return options_.every > absl::ZeroDuration() && absl::Now() - last_time_ >= options_.every;
}

bool Checkpointer::IsCurrent(int64_t global_step) const {
  absl::MutexLock lock(&mu_);
  return last_step_ == global_step;
}

bool Checkpointer::Requested() const {
  absl::MutexLock lock(&mu_);
  return requested_;
}

absl::Status Checkpointer::Write(int epochs_done, int64_t global_step,
                                 const nlohmann::json* position) {
  if (!enabled()) return absl::FailedPreconditionError("no checkpoint directory (--checkpoint_dir) was given");
  absl::MutexLock write_lock(&write_mu_);
  const absl::Time start = absl::Now();
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, variables_->Layout());
  TrainingState state;
  state.epochs_done = epochs_done;
  state.global_step = global_step;
  PS_ASSIGN_OR_RETURN(state.variables, variables_->ReadStates());
  nlohmann::json metadata =
      options_.metadata.is_object() ? options_.metadata : nlohmann::json::object();
  metadata["num_ps"] = variables_->num_ps();
  if (position != nullptr) metadata["data_position"] = *position;
  std::vector<std::pair<std::string, int>> num_shards;
  for (const VariableLayout& v : layout) {
    num_shards.push_back({v.name, static_cast<int>(v.shards.size())});
  }
  LogInfo(absl::StrCat("writing checkpoint of step ", global_step, " to ", writer_->root()));
  absl::StatusOr<std::string> path =
      writer_->Write(CheckpointFromTrainingState(state, *job_, metadata, num_shards));
  if (options_.observer != nullptr) {
    CheckpointEvent event;
    event.ok = path.ok();
    if (path.ok()) event.path = *path;
    event.error = std::string(path.status().message());
    event.step = global_step;
    event.epoch = epochs_done;
    event.took = absl::Now() - start;
    options_.observer->OnCheckpoint(event);
  }
  absl::MutexLock lock(&mu_);
  last_status_ = path.status();
  if (!path.ok()) return path.status();
  const int64_t steps_into_epoch =
      position != nullptr && position->contains("steps") && (*position)["steps"].is_number_integer()
          ? (*position)["steps"].get<int64_t>()
          : 0;
  LogInfo(absl::StrCat("checkpoint ", *path, " written (epoch ", epochs_done,
                       position != nullptr ? absl::StrCat(" and ", steps_into_epoch,
                                                          " steps of epoch ", epochs_done + 1)
                                           : "",
                       ", step ", global_step, ")"));
  last_time_ = absl::Now();
  last_step_ = global_step;
  requested_ = false;
  ++written_;
  last_.set_path(*path);
  last_.set_step(global_step);
  last_.set_epoch(epochs_done);
  return absl::OkStatus();
}

int64_t Checkpointer::Request() {
  absl::MutexLock lock(&mu_);
  requested_ = true;
  return written_;
}

absl::StatusOr<SaveCheckpointResponse> Checkpointer::AwaitWrite(int64_t written_before,
                                                                absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto written_or_over = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return written_ > written_before || job_ended_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&written_or_over), timeout);
  if (written_ > written_before) return last_;
  if (job_ended_) {
    if (!job_failed_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the job is over; its last checkpoint is ", last_.path().empty() ? "(none)" : last_.path()));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the job failed before the checkpoint was written",
        last_status_.ok() ? "" : absl::StrCat(": ", last_status_.message())));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no checkpoint written within ", absl::FormatDuration(timeout),
      "; the request stays pending and is served at the next chunk boundary"));
}

void Checkpointer::EndJob(bool failed) {
  absl::MutexLock lock(&mu_);
  job_ended_ = true;
  job_failed_ = failed;
}

SaveCheckpointResponse Checkpointer::last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

absl::Status Checkpointer::Restore(const CheckpointReader& checkpoint) const {
  PS_ASSIGN_OR_RETURN(TrainingState state, TrainingStateFromCheckpoint(checkpoint));
  return variables_->Restore(state, absl::StrCat("checkpoint ", checkpoint.path()));
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> Checkpointer::OpenLatest() const {
  if (!enabled()) return absl::FailedPreconditionError("no checkpoint directory (--checkpoint_dir) was given");
  return CheckpointReader::Open(options_.dir);
}

}  // namespace pstrain
