#include "ps_server/client/checkpointer.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/shard_files.h"
#include "common/logging.h"
#include "common/memory_budget.h"
#include "common/model/optimizer.h"
#include "common/status_macros.h"
#include "common/training/training_state.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

// A format-1 checkpoint passes through this process whole: every variable's value and
// optimizer slots. Checked against --max_memory before anything is read, so a model too
// large for the chief fails its checkpoint with a message, not the chief with bad_alloc.
absl::Status CheckWholeStateFits(const std::vector<VariableLayout>& layout, const JobSpec& job) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, Optimizer::Create(job.optimizer));
  const int64_t copies = 1 + static_cast<int64_t>(optimizer->NewState(1)->slots().size());
  int64_t elements = 0;
  for (const VariableLayout& v : layout) {
    int64_t n = 1;
    for (int64_t d : v.shape) n = SaturatingMul(n, d);
    elements = SaturatingAdd(elements, n);
  }
  return CheckMemoryBudget(SaturatingMul(SaturatingMul(elements, copies), sizeof(float)),
                           "a format-1 checkpoint (every variable and its optimizer slots, "
                           "read whole into the chief)");
}

}  // namespace

Checkpointer::Checkpointer(Options options, const JobSpec* job,
                           const ShardedVariables* variables)
    : options_(std::move(options)), job_(job), variables_(variables) {
  if (!options_.dir.empty()) {
    CheckpointWriter::Options writer_options;
    writer_options.keep = options_.keep;
    writer_options.delay_before_commit = options_.commit_delay;
    writer_ = std::make_unique<CheckpointWriter>(options_.dir, writer_options);
    // Folders of writes a crashed chief (or ps) left are never read: gone before any write.
    writer_->RemoveStaleTemps();
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

bool Checkpointer::UseSharded() {
  if (whole_only_) return false;
  absl::StatusOr<std::string> why_not = variables_->WhyNoShardedCheckpoints();
  // A ps that does not answer fails the write either way, naming it (and recovery
  // follows): no reason to give up sharded checkpoints for good.
  if (!why_not.ok()) return false;
  if (why_not->empty()) return true;
  LogInfo(absl::StrCat("checkpoints are read from the ps tasks and written by the chief "
                       "(format 1): ", *why_not));
  whole_only_ = true;
  return false;
}

absl::StatusOr<std::string> Checkpointer::WriteSharded(int epochs_done, int64_t global_step,
                                                       const nlohmann::json& metadata) {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, variables_->Layout());
  PS_ASSIGN_OR_RETURN(std::string temp, writer_->BeginSharded(global_step));
  absl::StatusOr<std::vector<ShardFile>> files = variables_->WriteCheckpointShards(temp);
  if (!files.ok()) {
    writer_->Abandon(temp);
    return files.status();
  }
  std::vector<ShardedVariableInfo> variables;
  for (const VariableLayout& v : layout) {
    variables.push_back({v.name, v.shape, static_cast<int>(v.shards.size())});
  }
  return writer_->CommitSharded(
      temp, ShardedCheckpointHeader(epochs_done, global_step, *job_, metadata, variables, *files),
      *files);
}

absl::StatusOr<std::string> Checkpointer::WriteWhole(int epochs_done, int64_t global_step,
                                                     const nlohmann::json& metadata) {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, variables_->Layout());
  PS_RETURN_IF_ERROR(CheckWholeStateFits(layout, *job_));
  TrainingState state;
  state.epochs_done = epochs_done;
  state.global_step = global_step;
  PS_ASSIGN_OR_RETURN(state.variables, variables_->ReadStates());
  std::vector<std::pair<std::string, int>> num_shards;
  for (const VariableLayout& v : layout) {
    num_shards.push_back({v.name, static_cast<int>(v.shards.size())});
  }
  return writer_->Write(CheckpointFromTrainingState(state, *job_, metadata, num_shards));
}

absl::Status Checkpointer::Write(int epochs_done, int64_t global_step,
                                 const nlohmann::json* position) {
  if (!enabled()) return absl::FailedPreconditionError("no checkpoint directory (--checkpoint_dir) was given");
  absl::MutexLock write_lock(&write_mu_);
  const absl::Time start = absl::Now();
  nlohmann::json metadata =
      options_.metadata->is_object() ? *options_.metadata : nlohmann::json::object();
  metadata["num_ps"] = variables_->num_ps();
  if (position != nullptr) metadata["data_position"] = *position;
  LogInfo(absl::StrCat("writing checkpoint of step ", global_step, " to ", writer_->root()));
  absl::StatusOr<std::string> path = absl::UnknownError("not written");
  bool sharded = UseSharded();
  if (sharded) {
    path = WriteSharded(epochs_done, global_step, metadata);
    // FAILED_PRECONDITION from a ps's write: it has no folder, or not the chief's.
    if (absl::IsFailedPrecondition(path.status())) {
      LogWarning(absl::StrCat("checkpoints are read from the ps tasks and written by the "
                              "chief (format 1) from now on: ", path.status().message()));
      whole_only_ = true;
      sharded = false;
    }
  }
  if (!sharded) path = WriteWhole(epochs_done, global_step, metadata);
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

std::string Checkpointer::ShardedName(const CheckpointReader& checkpoint) const {
  if (checkpoint.version() != 2 || !enabled()) return "";
  const std::filesystem::path path(checkpoint.path());
  const std::string name = path.filename().string();
  std::error_code ec;
  if (!IsCommittedCheckpointName(name) ||
      !std::filesystem::equivalent(path.parent_path(), options_.dir, ec) || ec) {
    return "";
  }
  return name;
}

bool Checkpointer::RestorableByPs(const CheckpointReader& checkpoint) const {
  return !ShardedName(checkpoint).empty();
}

absl::Status Checkpointer::RestoreShards(const CheckpointReader& checkpoint, int p) const {
  const std::string name = ShardedName(checkpoint);
  if (name.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", checkpoint.path(), " is not a sharded checkpoint in ", options_.dir));
  }
  return variables_->RestoreCheckpointShards(name, p);
}

absl::Status Checkpointer::RestoreWhole(const CheckpointReader& checkpoint) const {
  std::unique_ptr<CheckpointReader> loaded;
  const CheckpointReader* source = &checkpoint;
  if (!checkpoint.tensors_loaded()) {
    PS_ASSIGN_OR_RETURN(loaded, CheckpointReader::Open(checkpoint.path()));
    source = loaded.get();
  }
  PS_ASSIGN_OR_RETURN(TrainingState state, TrainingStateFromCheckpoint(*source));
  return variables_->Restore(state, absl::StrCat("checkpoint ", checkpoint.path()));
}

absl::Status Checkpointer::Restore(const CheckpointReader& checkpoint) const {
  if (RestorableByPs(checkpoint)) {
    absl::Status restored = RestoreShards(checkpoint, -1);
    // A ps without the folder (or an older ps): the chief reads the checkpoint itself.
    if (!absl::IsFailedPrecondition(restored) && !absl::IsUnimplemented(restored)) {
      return restored;
    }
    LogWarning(absl::StrCat("the ps tasks cannot restore ", checkpoint.path(),
                            " themselves (", restored.message(), "); the chief reads it whole"));
  }
  return RestoreWhole(checkpoint);
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> Checkpointer::OpenLatest() const {
  if (!enabled()) return absl::FailedPreconditionError("no checkpoint directory (--checkpoint_dir) was given");
  CheckpointReader::OpenOptions open;
  open.load_sharded_tensors = false;
  return CheckpointReader::Open(options_.dir, open);
}

}  // namespace pstrain
