#ifndef PSTRAIN_CHIEF_CHIEF_TASK_H_
#define PSTRAIN_CHIEF_CHIEF_TASK_H_

#include <iosfwd>
#include <string>

#include "absl/time/time.h"
#include "ps_server/client/checkpointer.h"
#include "common/daemon/daemon_runtime.h"

namespace pstrain {

// The chief's own options (its flags, chief/chief_flags.h); what every daemon shares is
// in its DaemonRuntime.
struct ChiefOptions {
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
  // Where and when checkpoints are written: checkpoint.dir (empty = no checkpoints; one
  // at every epoch end unless checkpoint_every_epoch is false), checkpoint.keep (>= 1;
  // older ones are deleted), checkpoint.every_steps / checkpoint.every (0 / zero =
  // never), checkpoint.commit_delay (fault injection for tests). Its metadata and
  // observer are the chief's own (the job's folder; the monitoring).
  Checkpointer::Options checkpoint;
  // "latest": continue from the newest good checkpoint in checkpoint.dir, or start fresh
  // (one log line) when there is none; "none": always start fresh; anything else: the
  // path of a checkpoint (or of a checkpoint root) to continue from, which must verify.
  std::string restore = "latest";
  // More checkpoints (with checkpoint.dir): at every epoch end unless
  // checkpoint_every_epoch is false, and on demand (the Chief service's SaveCheckpoint,
  // `psctl checkpoint`). consistent: a mid-epoch checkpoint pauses the workers between
  // chunks so every shard is of one step.
  bool checkpoint_every_epoch = true;
  bool consistent_checkpoints = true;
  // How long training waits for a failed ps to come back before the job fails.
  absl::Duration ps_recovery_timeout = absl::Seconds(120);
  // At the end of a job that trained to its end, the model with the weights the ps tasks
  // hold, as a Keras 3 .keras file written here (by the chief alone); empty = none.
  std::string export_keras;
};

// Runs the chief until the job ends: serves the Chief service through `runtime` (not
// owned), waits for every ps and worker task, coordinates training, writes one
// Keras-style line per epoch to `out`, then tells every task to shut down. Returns the exit
// code (common/daemon/exit_codes.h):
//   0  the job completed, or SIGTERM/SIGINT (or runtime->shutdown()) came while the chief
//      was still waiting for its tasks;
//   1  the job failed (the error, naming the task at fault, is logged); with
//      --restore=latest, checkpoints exist but none verifies (rather than silently
//      starting over);
//   2  a bad job spec or checkpoint options (a --restore PATH that does not verify,
//      checkpoint.keep < 1);
//   42 SIGTERM/SIGINT came during training: the chief stopped handing out work, wrote a
//      consistent checkpoint and left the ps and workers running, for a restarted chief
//      to re-attach them and resume from it (Coordinator::Preempt).
int RunChiefTask(const ChiefOptions& options, DaemonRuntime* runtime, std::ostream& out);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHIEF_TASK_H_
