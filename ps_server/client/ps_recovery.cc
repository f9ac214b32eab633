#include "ps_server/client/ps_recovery.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/training/training_state.h"

namespace pstrain {

PsRecovery::PsRecovery(Options options, const ShardedVariables* variables,
                       const Checkpointer* checkpointer, const CheckpointReader* restored_from)
    : options_(std::move(options)),
      variables_(variables),
      checkpointer_(checkpointer),
      restored_from_(restored_from) {}

bool PsRecovery::IsPsGone(const absl::Status& status) {
  // CANCELLED: a ps that is stopping (SIGTERM) cancels the calls it has not answered yet,
  // as a worker's server does (distribute/failure.h).
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsCancelled(status) || absl::IsNotFound(status) ||
         absl::IsFailedPrecondition(status) || absl::IsAborted(status);
}

absl::Status PsRecovery::RetryAfterRecovery(const std::function<absl::Status()>& step,
                                            absl::string_view resumes) const {
  absl::Status status = step();
  if (status.ok() || !IsPsGone(status)) return status;
  LogWarning(absl::StrCat("a ps failed: ", status.message(), "; recovering it"));
  PS_RETURN_IF_ERROR(Recover(resumes));
  return step();
}

absl::Status PsRecovery::Recover(absl::string_view resumes) const {
  const absl::Time give_up = absl::Now() + options_.timeout;
  ShardedVariables::Census census;
  while (true) {
    PS_ASSIGN_OR_RETURN(census, variables_->TakeCensus());
    if (census.unreachable.empty()) break;
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(absl::StrCat(
          "training paused for a failed ps, which did not come back within ",
          absl::FormatDuration(options_.timeout), ": ",
          absl::StrJoin(census.unreachable, "; ")));
    }
    if (options_.wait) {
      PS_RETURN_IF_ERROR(options_.wait(options_.poll_interval));
    } else {
      absl::SleepFor(options_.poll_interval);
    }
  }
  if (options_.observer != nullptr) options_.observer->OnPsRecovered();
  if (census.emptied.empty()) {
    LogWarning("every ps answers and holds its variables; training resumes");
    return absl::OkStatus();
  }
  return RecreateEmptied(census.emptied, resumes);
}

absl::Status PsRecovery::RecreateEmptied(const std::vector<int>& emptied,
                                         absl::string_view resumes) const {
  // The newest good checkpoint of this job (a corrupt newest one is reported and skipped),
  // else the one this run was restored from.
  std::unique_ptr<CheckpointReader> latest;
  const CheckpointReader* checkpoint = restored_from_;
  if (checkpointer_ != nullptr && checkpointer_->enabled()) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> opened = checkpointer_->OpenLatest();
    if (opened.ok()) {
      latest = *std::move(opened);
      checkpoint = latest.get();
    } else if (!absl::IsNotFound(opened.status())) {
      LogError(absl::StrCat("cannot read a checkpoint to recover from: ",
                            opened.status().message()));
    }
  }
  // A sharded checkpoint in the shared folder: each emptied ps creates its shards afresh
  // and reads its own rows of it (nobody holds them whole). Any other checkpoint is read
  // whole here (a sharded one opened without its tensors, read now).
  const bool by_ps = checkpoint != nullptr && checkpointer_ != nullptr &&
                     checkpointer_->RestorableByPs(*checkpoint);
  std::unique_ptr<CheckpointReader> loaded;
  if (checkpoint != nullptr && !by_ps && !checkpoint->tensors_loaded()) {
    PS_ASSIGN_OR_RETURN(loaded, CheckpointReader::Open(checkpoint->path()));
    checkpoint = loaded.get();
  }
  std::optional<TrainingState> state;
  if (checkpoint != nullptr && !by_ps) {
    PS_ASSIGN_OR_RETURN(state, TrainingStateFromCheckpoint(*checkpoint));
  }
  // Each emptied ps's shards are created from the checkpoint's values, slots and counts,
  // or from the initial values when there is no checkpoint.
  for (int p : emptied) {
    PS_RETURN_IF_ERROR(variables_->Recreate(
        p, state.has_value() ? &*state : nullptr,
        checkpoint != nullptr ? absl::StrCat("checkpoint ", checkpoint->path()) : "",
        options_.seed));
    if (by_ps) PS_RETURN_IF_ERROR(checkpointer_->RestoreShards(*checkpoint, p));
    // A warning (./demo.sh shows it; tests read the path): what was restored and where
    // training goes on.
    LogWarning(absl::StrCat(
        checkpoint != nullptr
            ? absl::StrCat(variables_->ps_name(p), " came back empty; its shards restored from ",
                           checkpoint->path(), " (step ", checkpoint->step(), ")")
            : absl::StrCat(variables_->ps_name(p),
                           " came back empty and no checkpoint exists yet; "
                           "its shards start again from their initial values"),
        resumes.empty() ? "" : "; ", resumes));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
