#ifndef PSTRAIN_PS_SERVER_CLIENT_SHARDED_EVALUATOR_H_
#define PSTRAIN_PS_SERVER_CLIENT_SHARDED_EVALUATOR_H_

// The model the ps tasks hold, evaluated the way a worker trains it, so that the task that
// evaluates (the chief, after every epoch) never holds more of the model than a worker:
// the dense variables are pulled whole, and a first-layer Embedding's table
// (HasRowSparseEmbedding) by the rows each batch needs (sparse_embedding.h). The figures
// are EvaluateOn's over the whole weights: the same batches, and a compact model whose
// forward pass is the full model's.
//
// Thread-safety: not thread-safe; one caller at a time.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/model/model.h"
#include "common/training/evaluator.h"
#include "ps_server/client/sharded_variables.h"
#include "ps_server/client/sparse_embedding.h"
#include "ps_server/ps_client.h"

namespace pstrain {

class ShardedEvaluator {
 public:
  // Not owned; must outlive this. `ps` are the clients `variables` places shards on.
  ShardedEvaluator(Model* model, const ShardedVariables* variables, std::vector<PsClient*> ps)
      : model_(model), variables_(variables), ps_(std::move(ps)) {}

  // Evaluates the ps tasks' current values on every example of `data`, in batches of
  // `batch_size` (EvaluateInBatches).
  // Errors: INVALID_ARGUMENT before the variables were created, batch_size < 1, an id
  //         outside the table; the first failed Pull or PullRows (naming the ps);
  //         Model::Evaluate's.
  absl::StatusOr<EvaluationResult> Evaluate(const Dataset& data, int64_t batch_size);

 private:
  Model* const model_;                      // Not owned.
  const ShardedVariables* const variables_;  // Not owned.
  const std::vector<PsClient*> ps_;         // Not owned.
  // The table's rows for a batch (null until the first Evaluate of a model that starts
  // with an Embedding); keeps its compact model between calls.
  std::unique_ptr<SparseEmbedding> rows_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_SHARDED_EVALUATOR_H_
