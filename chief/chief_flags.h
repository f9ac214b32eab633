#ifndef PSTRAIN_CHIEF_CHIEF_FLAGS_H_
#define PSTRAIN_CHIEF_CHIEF_FLAGS_H_

#include "absl/status/statusor.h"
#include "chief/chief_task.h"
#include "chief/evaluator_task.h"
#include "common/daemon/daemon_runtime.h"

namespace pstrain {

// The chief's own flags (--job, --epochs, --checkpoint_dir, ...) as ChiefOptions.
// Errors: INVALID_ARGUMENT a value out of range, in one line for the user.
absl::StatusOr<ChiefOptions> ChiefOptionsFromFlags();

// The evaluator task's flags (--checkpoint_dir, --logdir, --eval_timeout,
// --eval_poll_interval) as EvaluatorOptions. Errors: INVALID_ARGUMENT a bad duration.
absl::StatusOr<EvaluatorOptions> EvaluatorOptionsFromFlags();

// The chief binary's body (chief/main.cc): for TF_CONFIG's chief, ChiefOptionsFromFlags
// (a bad flag is exit 2), then RunChiefTask with the epoch lines on stdout; for its
// evaluator, RunEvaluatorTask with the evaluation lines on stdout.
int RunChiefFromFlags(DaemonRuntime* runtime);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHIEF_FLAGS_H_
