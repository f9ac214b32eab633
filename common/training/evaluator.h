#ifndef PSTRAIN_COMMON_TRAINING_EVALUATOR_H_
#define PSTRAIN_COMMON_TRAINING_EVALUATOR_H_

// The one evaluation every trainer and tool runs: a model's weights on a data set, in
// batches, dropout off (Model::Evaluate), summed into the mean loss and the accuracy. The
// chief evaluates the weights it gathers from the ps tasks on the validation data after
// every epoch, Fit the weights it trains, and tools/evaluate a checkpoint's.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/model/model.h"
#include "common/tensor.h"

namespace pstrain {

struct EvaluationResult {
  double loss = 0;      // mean over the samples (0 when there are none)
  double accuracy = 0;  // fraction of the samples the metric counts as correct
  int64_t samples = 0;
};

// Evaluates `weights` (in model->variables() order) on every example of `data`,
// in batches of `batch_size` rows taken in order (the last may be shorter), so the result
// depends on nothing but its arguments. `model` is used by this thread only meanwhile.
// Errors: INVALID_ARGUMENT batch_size < 1; Model::Evaluate's (data or weights that do not
//         fit the model, ...).
absl::StatusOr<EvaluationResult> EvaluateOn(Model* model, const std::vector<Tensor>& weights,
                                            const Dataset& data, int64_t batch_size);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_EVALUATOR_H_
