#include "distribute/job_phase.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain::distribute {
namespace {

struct PhaseRow {
  JobPhase phase;
  ChiefStatusResponse::Phase wire;
  const char* name;
};

// The one table of the three spellings: a phase added to one place and not the others
// fails job_phase_test.
constexpr PhaseRow kPhases[] = {
    {JobPhase::kWaitingForTasks, ChiefStatusResponse::WAITING_FOR_TASKS, "waiting_for_tasks"},
    {JobPhase::kRestoring, ChiefStatusResponse::RESTORING, "restoring"},
    {JobPhase::kTraining, ChiefStatusResponse::TRAINING, "training"},
    {JobPhase::kRecovering, ChiefStatusResponse::RECOVERING, "recovering"},
    {JobPhase::kDone, ChiefStatusResponse::DONE, "done"},
    {JobPhase::kFailed, ChiefStatusResponse::FAILED, "failed"},
};

const PhaseRow* RowOf(JobPhase phase) {
  for (const PhaseRow& row : kPhases) {
    if (row.phase == phase) return &row;
  }
  return nullptr;
}

}  // namespace

absl::string_view JobPhaseName(JobPhase phase) {
  const PhaseRow* row = RowOf(phase);
  return row == nullptr ? "unknown" : row->name;
}

bool IsFinal(JobPhase phase) { return phase == JobPhase::kDone || phase == JobPhase::kFailed; }

void SetPhase(JobPhase phase, ChiefStatusResponse* response) {
  const PhaseRow* row = RowOf(phase);
  if (row == nullptr) return;
  response->set_phase(row->wire);
  response->set_phase_name(row->name);
}

absl::StatusOr<JobPhase> PhaseOf(const ChiefStatusResponse& response) {
  if (response.phase() != ChiefStatusResponse::PHASE_UNSPECIFIED) {
    for (const PhaseRow& row : kPhases) {
      if (row.wire == response.phase()) return row.phase;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("the chief reports phase ", static_cast<int>(response.phase()),
                     " (\"", response.phase_name().substr(0, 64),
                     "\"), which this reader does not know"));
  }
  for (const PhaseRow& row : kPhases) {
    if (response.phase_name() == row.name) return row.phase;
  }
  return absl::InvalidArgumentError(absl::StrCat("the chief reports no phase this reader knows (\"",
                                                 response.phase_name().substr(0, 64), "\")"));
}

}  // namespace pstrain::distribute
