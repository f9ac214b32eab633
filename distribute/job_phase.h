#ifndef PSTRAIN_DISTRIBUTE_JOB_PHASE_H_
#define PSTRAIN_DISTRIBUTE_JOB_PHASE_H_

// Where a parameter-server training job stands, as the chief reports it
// (ChiefStatusResponse.phase, a proto enum on the wire; its words in phase_name for
// readers older than the enum). Parsed once here, so no reader compares strings.

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/chief.pb.h"

namespace pstrain::distribute {

enum class JobPhase {
  kWaitingForTasks,
  kRestoring,
  kTraining,
  kRecovering,  // a ps failed: recovering it
  kDone,
  kFailed,
};

// "waiting_for_tasks", "restoring", "training", "recovering", "done", "failed".
absl::string_view JobPhaseName(JobPhase phase);

// Whether the job is over (done or failed).
bool IsFinal(JobPhase phase);

// Writes `phase` into `response`: the enum, and its name for older readers.
void SetPhase(JobPhase phase, ChiefStatusResponse* response);

// The phase `response` reports: its enum, or, from a chief older than the enum (phase
// unspecified), the phase its phase_name names.
// Errors: INVALID_ARGUMENT neither says a phase this reader knows (a newer chief's value,
// or nothing at all), naming what it got.
absl::StatusOr<JobPhase> PhaseOf(const ChiefStatusResponse& response);

}  // namespace pstrain::distribute

#endif  // PSTRAIN_DISTRIBUTE_JOB_PHASE_H_
