#include "common/training/evaluator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<EvaluationResult> EvaluateInBatches(const Dataset& data, int64_t batch_size,
                                                   const EvaluateBatch& evaluate) {
  if (batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("evaluation batch size ", batch_size, " < 1"));
  }
  double loss_sum = 0;
  int64_t correct = 0;
  EvaluationResult result;
  for (int64_t start = 0; start < data.num_examples(); start += batch_size) {
    const int64_t count = std::min(batch_size, data.num_examples() - start);
    PS_ASSIGN_OR_RETURN(Dataset batch, data.Slice(start, count));
    PS_ASSIGN_OR_RETURN(StepResult r, evaluate(batch.x, batch.y));
    loss_sum += r.loss_sum;
    correct += r.correct;
    result.samples += r.samples;
  }
  if (result.samples > 0) {
    result.loss = loss_sum / result.samples;
    result.accuracy = static_cast<double>(correct) / result.samples;
  }
  return result;
}

absl::StatusOr<EvaluationResult> EvaluateOn(Model* model, const std::vector<Tensor>& weights,
                                            const Dataset& data, int64_t batch_size) {
  return EvaluateInBatches(data, batch_size, [&](const Tensor& x, const Tensor& y) {
    return model->Evaluate(weights, x, y);
  });
}

}  // namespace pstrain
