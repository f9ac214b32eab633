#include "ps_server/client/sharded_evaluator.h"

#include <utility>

#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<EvaluationResult> ShardedEvaluator::Evaluate(const Dataset& data,
                                                            int64_t batch_size) {
  const bool by_rows = HasRowSparseEmbedding(*model_);
  if (by_rows && rows_ == nullptr) {
    PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, variables_->Layout());
    PS_ASSIGN_OR_RETURN(rows_, SparseEmbedding::Create(*model_, layout[0], ps_));
  }
  PS_ASSIGN_OR_RETURN(std::vector<Tensor> weights, variables_->Pull(/*skip_first=*/by_rows));
  const EvaluateBatch evaluate = [&](const Tensor& x,
                                    const Tensor& y) -> absl::StatusOr<StepResult> {
    if (!by_rows) return model_->Evaluate(weights, x, y);
    // weights[0] becomes the batch's compact table.
    PS_ASSIGN_OR_RETURN(Model * compact, rows_->PullBatchRows(x, &weights[0]));
    return compact->Evaluate(weights, rows_->local_x(), y);
  };
  return EvaluateInBatches(data, batch_size, evaluate);
}

}  // namespace pstrain
