#ifndef PSTRAIN_TOOLS_EVALUATE_LIB_H_
#define PSTRAIN_TOOLS_EVALUATE_LIB_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/model/job_spec.h"
#include "common/training/evaluator.h"

namespace pstrain {

// A checkpoint's weights are evaluated by ps_server/client/checkpoint_evaluation.h's
// EvaluateCheckpoint (the evaluator task's code). This evaluates, as that does, the
// weights a job's .keras model holds (JobSpec::
// initial_weights), on the job's data (relative paths against `job_dir`): what
// `keras.saving.load_model(path).evaluate(...)` reports.
// Errors: INVALID_ARGUMENT an unknown `data`, a job whose model is not a .keras file;
//         NOT_FOUND the job has no such data source; the data loader's errors.
absl::StatusOr<EvaluationResult> EvaluateKerasJob(const JobSpec& job, const std::string& job_dir,
                                                  const std::string& data);

}  // namespace pstrain

#endif  // PSTRAIN_TOOLS_EVALUATE_LIB_H_
