#ifndef PSTRAIN_COMMON_DAEMON_EXIT_CODES_H_
#define PSTRAIN_COMMON_DAEMON_EXIT_CODES_H_

#include "absl/status/status.h"

namespace pstrain {

// How every pstrain daemon (ps_server, worker, chief, train) exits. Orchestrators act on
// them: Compose's `restart: on-failure` and Kubernetes' `restartPolicy: OnFailure` restart a
// task that exits non-zero and leave one that exits 0 down. The README's "Exit codes"
// table says the same.
//
// | code | meaning                                                         | restart?      |
// | ---- | --------------------------------------------------------------- | ------------- |
// |  0   | done: the job finished (the chief told the task to shut down),  | no            |
// |      | or SIGTERM/SIGINT stopped a ps, a worker, or a chief that was   |               |
// |      | still waiting for its tasks                                     |               |
// |  1   | a runtime failure: the port is taken, the chief (or a task) did | often helps   |
// |      | not answer in time, the job failed                              |               |
// |  2   | bad configuration: flags, TF_CONFIG, job spec, device, a model  | will not help |
// |      | that needs more than --max_memory                               |               |
// |  42  | preempted: SIGTERM/SIGINT reached the chief (or train) during   | yes: resumes  |
// |      | training; it stopped handing out work and wrote a checkpoint    |               |
// |      | (TensorFlow's PreemptionCheckpointHandler exits with 42 too)    |               |
//
// A second SIGTERM/SIGINT, or --shutdown_grace running out, ends a daemon at once with the
// code its shutdown was heading for (0 or 42). An unknown or unparsable flag is reported by
// Abseil's parser, which exits 1; --help and --version exit 0.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitBadConfiguration = 2,
  kExitPreempted = 42,
};

// How a daemon exits when `status` stops it: the configuration's fault (INVALID_ARGUMENT,
// NOT_FOUND, and RESOURCE_EXHAUSTED, which before training means a model or data set over
// the memory budget: a restart will not help) is 2, anything else (UNAVAILABLE: the port
// is taken, a peer did not answer, ...) 1.
inline int ExitCodeFor(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsNotFound(status) ||
                 absl::IsResourceExhausted(status)
             ? kExitBadConfiguration
             : kExitFailure;
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_EXIT_CODES_H_
