#include "ps_server/client/sharded_evaluator.h"

#include <utility>

#include "common/status_macros.h"

namespace pstrain {

namespace {

// The ps tasks' weights: dense variables pulled, the table's rows by PullRows.
class PsEvaluationWeights : public EvaluationWeights {
 public:
  PsEvaluationWeights(const ShardedVariables* variables, std::vector<PsClient*> ps)
      : variables_(variables), ps_(std::move(ps)) {}

  absl::StatusOr<std::vector<Tensor>> ReadVariables(bool skip_table) override {
    return variables_->Pull(/*skip_first=*/skip_table);
  }

  absl::StatusOr<std::unique_ptr<SparseEmbedding>> TableRows(const Model& model) override {
    PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, variables_->Layout());
    return SparseEmbedding::Create(model, layout[0], ps_);
  }

 private:
  const ShardedVariables* const variables_;  // Not owned.
  const std::vector<PsClient*> ps_;          // Not owned.
};

}  // namespace

ShardedEvaluator::ShardedEvaluator(Model* model, const ShardedVariables* variables,
                                   std::vector<PsClient*> ps)
    : model_(model),
      owned_weights_(std::make_unique<PsEvaluationWeights>(variables, std::move(ps))),
      weights_(owned_weights_.get()) {}

ShardedEvaluator::~ShardedEvaluator() = default;

absl::StatusOr<EvaluationResult> ShardedEvaluator::Evaluate(const Dataset& data,
                                                            int64_t batch_size) {
  const bool by_rows = HasRowSparseEmbedding(*model_);
  if (by_rows && rows_ == nullptr) {
    PS_ASSIGN_OR_RETURN(rows_, weights_->TableRows(*model_));
  }
  PS_ASSIGN_OR_RETURN(std::vector<Tensor> weights, weights_->ReadVariables(by_rows));
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
