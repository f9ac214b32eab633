#ifndef PSTRAIN_CHIEF_CHIEF_TASK_H_
#define PSTRAIN_CHIEF_CHIEF_TASK_H_

#include <iosfwd>
#include <string>

#include "common/daemon_options.h"
#include "common/shutdown_signal.h"

namespace pstrain {

struct ChiefOptions {
  DaemonOptions daemon;
  // The job spec file (JSON). Relative paths inside it are relative to its folder.
  std::string job_path;
  // When > 0, overrides fit.epochs of the job spec.
  int epochs_override = 0;
  // When not empty, replaces the job's "consistency" mode ("async", "bounded_staleness",
  // "sync"); staleness_override (>= 0) its "staleness". Workers receive the job as changed.
  std::string consistency_override;
  int staleness_override = -1;
  int64_t steps_per_call = 100;
  // Deadline of one RunSteps call (a chunk of training steps on a worker).
  absl::Duration run_steps_timeout = absl::Minutes(10);
};

// Runs the chief until the job ends: serves the Chief service, waits for every ps and
// worker task, coordinates training, writes one Keras-style line per epoch to `out`, then
// tells every task to shut down. Returns the exit code: 0 when the job completed, 1 when
// it failed (the error, naming the task at fault, is logged), 2 for a bad job spec.
// `shutdown` is not owned; requesting it aborts the job.
int RunChiefTask(const ChiefOptions& options, ShutdownSignal* shutdown, std::ostream& out);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHIEF_TASK_H_
