#ifndef PSTRAIN_PSTRAIN_PREEMPTION_H_
#define PSTRAIN_PSTRAIN_PREEMPTION_H_

// SIGTERM and SIGINT during a loop of one's own, taken as TensorFlow's
// PreemptionCheckpointHandler takes them, and as the chief daemon does: the first signal
// only records itself; the loop asks Preempted() at its step boundaries, saves a
// checkpoint (Strategy::Save), under parameter_server leaves the ps and workers running
// (Strategy::LeaveTasksRunning), and exits kExitPreempted, which orchestrators restart
// (README "Exit codes"); the restarted program resumes from the checkpoint
// (Strategy::Restore). A second signal ends the process at once, as the signal's default
// does.
//
// The handler only stores the signal's number in an atomic (async-signal-safe); nothing
// else runs in it. Thread-safety: Watch and Preempted may be called from any thread.

namespace pstrain::distribute {

// What a preempted program exits with, as every pstrain daemon does (and TensorFlow's
// PreemptionCheckpointHandler).
inline constexpr int kExitPreempted = 42;

class PreemptionWatcher {
 public:
  // Installs the handler of SIGTERM and SIGINT. Later calls do nothing.
  static void Watch();
  // The first signal received since Watch ("SIGTERM" or "SIGINT"), or null when none was.
  static const char* Preempted();
};

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_PREEMPTION_H_
