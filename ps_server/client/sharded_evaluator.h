#ifndef PSTRAIN_PS_SERVER_CLIENT_SHARDED_EVALUATOR_H_
#define PSTRAIN_PS_SERVER_CLIENT_SHARDED_EVALUATOR_H_

// A model evaluated the way a worker trains it, so that the task that evaluates never
// holds more of the model than a worker: the dense variables are read whole, and a
// first-layer Embedding's table (HasRowSparseEmbedding) by the rows each batch needs
// (sparse_embedding.h). The figures are EvaluateOn's over the whole weights: the same
// batches, and a compact model whose forward pass is the full model's.
//
// Where the weights come from is an EvaluationWeights: the ps tasks over PsClients (the
// chief, after every epoch) or a checkpoint's files (checkpoint_weights.h: the evaluator
// task and tools/evaluate), so both evaluate with this one loop.
//
// Thread-safety: not thread-safe; one caller at a time.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/model/model.h"
#include "common/tensor.h"
#include "common/training/evaluator.h"
#include "ps_server/client/sharded_variables.h"
#include "ps_server/client/sparse_embedding.h"
#include "ps_server/ps_client.h"

namespace pstrain {

// The weights of one model as an evaluator reads them.
class EvaluationWeights {
 public:
  virtual ~EvaluationWeights() = default;
  // Every variable of the model, whole, in Model::variables() order; variable 0 (the
  // table) an empty Tensor when `skip_table`.
  virtual absl::StatusOr<std::vector<Tensor>> ReadVariables(bool skip_table) = 0;
  // The reader of the rows of `model`'s Embedding table (variable 0) a batch needs.
  virtual absl::StatusOr<std::unique_ptr<SparseEmbedding>> TableRows(const Model& model) = 0;
};

class ShardedEvaluator {
 public:
  // The ps tasks' current values. Not owned; must outlive this. `ps` are the clients
  // `variables` places shards on.
  ShardedEvaluator(Model* model, const ShardedVariables* variables, std::vector<PsClient*> ps);
  // `weights`' values. Neither is owned; both must outlive this.
  ShardedEvaluator(Model* model, EvaluationWeights* weights) : model_(model), weights_(weights) {}
  ~ShardedEvaluator();

  // Evaluates the weights on every example of `data`, in batches of `batch_size`
  // (EvaluateInBatches).
  // Errors: INVALID_ARGUMENT before the variables were created, batch_size < 1, an id
  //         outside the table; the first failed read (a Pull or PullRows naming the ps, a
  //         shard file naming the file); Model::Evaluate's.
  absl::StatusOr<EvaluationResult> Evaluate(const Dataset& data, int64_t batch_size);

 private:
  Model* const model_;  // Not owned.
  // The ps tasks' weights, when made from them; weights_ points at it.
  std::unique_ptr<EvaluationWeights> owned_weights_;
  EvaluationWeights* const weights_;  // Not owned.
  // The table's rows for a batch (null until the first Evaluate of a model that starts
  // with an Embedding); keeps its compact model between calls.
  std::unique_ptr<SparseEmbedding> rows_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_SHARDED_EVALUATOR_H_
