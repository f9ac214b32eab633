#ifndef PSTRAIN_COMMON_TRAINING_EVALUATOR_H_
#define PSTRAIN_COMMON_TRAINING_EVALUATOR_H_

// The one evaluation every trainer and tool runs: a model's weights on a data set, in
// batches, dropout off (Model::Evaluate), summed into the mean loss and the accuracy. The
// chief evaluates the weights it gathers from the ps tasks on the validation data after
// every epoch, Fit the weights it trains, and tools/evaluate a checkpoint's.

#include <cstdint>
#include <functional>
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

// Evaluates one batch (x, y), as Model::Evaluate does.
using EvaluateBatch =
    std::function<absl::StatusOr<StepResult>(const Tensor& x, const Tensor& y)>;

// EvaluateOn with each batch handed to `evaluate` instead of one model with whole
// weights: the chief's evaluation pulls only the Embedding rows each batch needs
// (ps_server/client/sparse_embedding.h). The batches and the sums are EvaluateOn's, so
// the same figures come out. Errors: INVALID_ARGUMENT batch_size < 1; `evaluate`'s.
absl::StatusOr<EvaluationResult> EvaluateInBatches(const Dataset& data, int64_t batch_size,
                                                   const EvaluateBatch& evaluate);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_EVALUATOR_H_
