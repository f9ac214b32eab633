#ifndef PSTRAIN_TOOLS_EVALUATE_LIB_H_
#define PSTRAIN_TOOLS_EVALUATE_LIB_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"
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

}  // namespace pstrain

#endif  // PSTRAIN_TOOLS_EVALUATE_LIB_H_
