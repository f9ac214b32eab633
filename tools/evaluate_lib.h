#ifndef PSTRAIN_TOOLS_EVALUATE_LIB_H_
#define PSTRAIN_TOOLS_EVALUATE_LIB_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"
#include "common/model/job_spec.h"
#include "common/training/evaluator.h"

namespace pstrain {

// Evaluates the weights of `checkpoint` on one of its job's data sources, in this process
// on the CPU backend (no cluster): builds the model from the job spec the checkpoint
// stores, sets its loss, loads `data` ("test" or "validation": the job's validation data;
// "train": its training data; relative paths against the job folder recorded in the
// checkpoint's metadata) and reports the mean loss and accuracy.
// Errors: INVALID_ARGUMENT an unknown `data`, a job spec that does not parse, weights that
//         do not fit the model; NOT_FOUND the job has no such data source; the data
//         loader's errors.
absl::StatusOr<EvaluationResult> EvaluateCheckpoint(const CheckpointReader& checkpoint,
                                                    const std::string& data);

// As EvaluateCheckpoint, for the weights a job's .keras model holds (JobSpec::
// initial_weights), on the job's data (relative paths against `job_dir`): what
// `keras.saving.load_model(path).evaluate(...)` reports.
// Errors: INVALID_ARGUMENT an unknown `data`, a job whose model is not a .keras file;
//         NOT_FOUND the job has no such data source; the data loader's errors.
absl::StatusOr<EvaluationResult> EvaluateKerasJob(const JobSpec& job, const std::string& job_dir,
                                                  const std::string& data);

}  // namespace pstrain

#endif  // PSTRAIN_TOOLS_EVALUATE_LIB_H_
