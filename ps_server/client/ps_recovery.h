#ifndef PSTRAIN_PS_SERVER_CLIENT_PS_RECOVERY_H_
#define PSTRAIN_PS_SERVER_CLIENT_PS_RECOVERY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/checkpoint/checkpoint.h"
#include "common/training/training_observer.h"
#include "ps_server/client/checkpointer.h"
#include "ps_server/client/sharded_variables.h"

namespace pstrain {

// Brings a parameter-server job back after a ps failed, as the one task that placed the
// variables sees it (the chief daemon's Coordinator, or a custom loop's chief under
// parameter_server): a census until every ps answers again, then the shards of each ps
// that came back empty (restarted) are created again from the newest good checkpoint,
// else the checkpoint the run was restored from, else the initial values (which that ps
// draws again for its own rows: nobody holds them). Training goes
// on after Recover() returns; the caller makes the workers pull afresh (their cached
// values may be older than what was restored).
//
// Knows nothing of gRPC or of who trains: the ps are the ShardedVariables' PsClients.
// Thread-safety: Recover is called by one thread at a time (the caller pauses its work
// while the ps is recovered); IsPsGone from any.
class PsRecovery {
 public:
  struct Options {
    // How long the census waits for every ps to answer before the job fails.
    absl::Duration timeout = absl::Seconds(120);
    // Between census rounds.
    absl::Duration poll_interval = absl::Milliseconds(250);
    // Waits up to its argument between census rounds, and returns OK to go on waiting or
    // the status to give up with (the chief's CANCELLED on shutdown, ABORTED on
    // preemption); it should return early when stopping. Empty: sleeps.
    std::function<absl::Status(absl::Duration)> wait;
    // The seed the initial values are drawn from (JobSpec::seed), for a ps recreated
    // before any checkpoint exists.
    uint64_t seed = 0;
    // Told once per recovery, when every ps answers again. Not owned; may be null.
    TrainingObserver* observer = nullptr;
  };

  // Not owned; must outlive this. `checkpointer` may be null or not enabled() (no
  // checkpoints: the newest is then `restored_from`); `restored_from` may be null (a fresh
  // start).
  PsRecovery(Options options, const ShardedVariables* variables,
             const Checkpointer* checkpointer, const CheckpointReader* restored_from);

  // Whether a ps call failed because the ps is gone (UNAVAILABLE, DEADLINE_EXCEEDED,
  // CANCELLED: a stopping ps cancels what it has not answered, ABORTED: a worker's report
  // of a failed ps) or came back empty after a restart
  // (NOT_FOUND a variable, FAILED_PRECONDITION no variables at all), as opposed to a bad
  // request: only then may Recover help.
  static bool IsPsGone(const absl::Status& status);

  // Waits (Options::timeout) until every ps answers, then recreates the shards of any
  // that lost them. `resumes` ends the warning that names what a ps was restored from
  // (e.g. "training continues in epoch 3").
  // Errors: UNAVAILABLE naming the ps that did not come back ("... did not come back
  //         within <timeout>: <ps>"); Options::wait's status; DATA_LOSS or
  //         INVALID_ARGUMENT a checkpoint that cannot be restored; the first failed
  //         create or restore (naming the ps).
  absl::Status Recover(absl::string_view resumes) const;

  // Runs `step` (a read of every ps: an evaluation, a checkpoint); when it fails because a
  // ps is gone (IsPsGone), recovers the ps (Recover) and runs it once more.
  // Errors: `step`'s, or Recover's.
  absl::Status RetryAfterRecovery(const std::function<absl::Status()>& step,
                                  absl::string_view resumes) const;

 private:
  // Recreates the shards of the emptied ps tasks.
  absl::Status RecreateEmptied(const std::vector<int>& emptied, absl::string_view resumes) const;

  const Options options_;
  const ShardedVariables* const variables_;      // Not owned.
  const Checkpointer* const checkpointer_;       // Not owned; may be null.
  const CheckpointReader* const restored_from_;  // Not owned; may be null.
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_PS_RECOVERY_H_
