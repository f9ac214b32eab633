#ifndef PSTRAIN_DISTRIBUTE_FAILURE_H_
#define PSTRAIN_DISTRIBUTE_FAILURE_H_

// The one rule by which the chief sorts the failure of work it ran on a worker (a chunk
// of training steps, a custom loop's function): the ClosureScheduler, the chief's
// Coordinator and the custom loop all decide with ClassifyFailure what a failed closure
// means, and a worker reports a failed ps with PsFailureOnWorker so that the chief can
// tell it apart from the worker itself being unreachable (both are UNAVAILABLE to it).
//
// Thread-safety: pure functions.

#include "absl/status/status.h"

namespace pstrain::distribute {

enum class FailureKind {
  kNone,           // OK
  kFunctionError,  // the work's own error: retrying elsewhere would fail the same way
  kWorkerLost,     // the worker could not be reached, missed the deadline or is shutting
                   // down: the work runs again on another worker
  kPsFailed,       // the worker is fine but a ps it trains against is gone or came back
                   // empty: recover the ps, then run the work again
};

// "none", "function error", "worker lost", "ps failed".
const char* FailureKindName(FailureKind kind);

// How the chief reads `status`, the outcome of work it sent to a worker:
//   OK -> kNone; UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED (a worker's server cancels the
//   calls it has not answered when it stops) -> kWorkerLost; ABORTED (what
//   PsFailureOnWorker makes of a ps failure) -> kPsFailed; any other code ->
//   kFunctionError.
FailureKind ClassifyFailure(const absl::Status& status);

// On a worker: the status to report for work that failed with `status` from its own
// calls to the ps tasks. A ps that is gone (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED,
// ABORTED) or came back empty after a restart (NOT_FOUND a variable on a pull,
// FAILED_PRECONDITION no variables on a push) becomes ABORTED "a ps failed: <message>",
// which the chief classifies kPsFailed; any other status is returned unchanged (the
// work's own error). OK stays OK.
absl::Status PsFailureOnWorker(const absl::Status& status);

}  // namespace pstrain::distribute

#endif  // PSTRAIN_DISTRIBUTE_FAILURE_H_
