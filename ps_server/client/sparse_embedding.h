#ifndef PSTRAIN_PS_SERVER_CLIENT_SPARSE_EMBEDDING_H_
#define PSTRAIN_PS_SERVER_CLIENT_SPARSE_EMBEDDING_H_

// A worker's side of a row-sparse Embedding table in the parameter-server strategy, as
// TensorFlow's ParameterServerStrategy trains an embedding lookup (IndexedSlices gradients)
// and ps-lite's KVWorker pulls and pushes by key.
//
// The model's first layer is an Embedding whose table [rows, width] lives on the ps tasks,
// possibly split into row shards (common/sharding). Each step the worker never holds the
// table: it
//   1. renumbers the batch's ids: the distinct ids, ascending, become 0..U-1;
//   2. pulls only those U rows from the shards that own them (PsClient::PullRows, one
//      call per ps, all at once) into a compact table [capacity, width] whose rows
//      U..capacity-1 are zeros no id refers to;
//   3. runs a compact copy of the model (the same layers, the Embedding's input_dim set to
//      the capacity) on the renumbered ids: its forward pass is the full model's exactly,
//      and the Embedding's backward pass sums the gradients of repeated ids into their one
//      compact row;
//   4. pushes the U gradient rows to their shards (PsClient::PushRows), each shard's rows
//      counted from the shard's first row.
// So a step moves U rows each way, whatever the table's size. In sync mode (SetSyncMode)
// steps 2 and 4 also name each shard the batch missed, with no rows, and the push carries
// the version each shard was pulled at: the ps aggregates the workers' rows per shard and
// version (ps_server/sync_aggregator.h), and a worker whose batch missed a shard must
// still count in that shard's aggregate, as its dense gradient of zeros would.
// The chief evaluates the same way (steps 1 to 3, its forward pass only: Model::Evaluate
// on the compact model), so validation never gathers the table either.
//
// Thread-safety: not thread-safe; one per trainer. PushShardRows(p, ...) for different p
// may run at once.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model.h"
#include "common/sharding/shard_layout.h"
#include "common/tensor.h"
#include "proto/ps.pb.h"
#include "ps_server/ps_client.h"

namespace pstrain {

// Whether `model` can train its first layer row-sparsely: that layer is an Embedding (its
// variable is the model's variable 0). The consistency mode decides the rest (not sync).
bool HasRowSparseEmbedding(const Model& model);

// The distinct ids of a batch and the batch renumbered to them.
struct BatchRows {
  std::vector<int64_t> ids;  // distinct, ascending
  Tensor local_x;            // x's shape; each id replaced by its index in `ids`
};

// Renumbers `x` (ids as floats, any shape). Errors: INVALID_ARGUMENT an element that is not
// an integer in [0, table_rows), naming it.
absl::StatusOr<BatchRows> RenumberBatch(const Tensor& x, int64_t table_rows);

class SparseEmbedding {
 public:
  // `model` has a row-sparse Embedding (HasRowSparseEmbedding) and must outlive this;
  // `table` is its variable's layout; `ps` the clients the layout's ps indices name.
  // Errors: INVALID_ARGUMENT a model without one, a table layout of another shape.
  static absl::StatusOr<std::unique_ptr<SparseEmbedding>> Create(const Model& model,
                                                                 VariableLayout table,
                                                                 std::vector<PsClient*> ps);

  // Where step 2 gets rows from instead of the ps tasks (an evaluator reading a
  // checkpoint's shard files): `ids` (distinct, ascending) into `out`, row i at
  // out + i * width. Its errors are PullBatchRows'.
  using RowReader = std::function<absl::Status(const std::vector<int64_t>& ids, float* out)>;
  // Steps 1 to 3 only, over `read_rows`, for a table of `table.shape` (`table.shards`
  // unused). Errors: as Create.
  static absl::StatusOr<std::unique_ptr<SparseEmbedding>> CreateWithRowReader(
      const Model& model, VariableLayout table, RowReader read_rows);

  // Steps 1 to 3 above for batch `x`: renumbers it, makes sure the compact model holds
  // x's element count of rows, and pulls the rows into `*compact_table` (resized to
  // [capacity, width] when needed). Returns the compact model, to run on local_x().
  // Errors: RenumberBatch's; Model::FromKerasJson's (INTERNAL); PsClient::PullRows' (the
  // ps named); INTERNAL a ps answered rows of another shape.
  absl::StatusOr<Model*> PullBatchRows(const Tensor& x, Tensor* compact_table);
  const Tensor& local_x() const { return rows_.local_x; }
  // The distinct ids of the last PullBatchRows.
  const std::vector<int64_t>& ids() const { return rows_.ids; }

  // Sync mode: every shard on a ps the batch touches or not, pulled (for its version) and
  // pushed each step, the push naming the versions pulled. Call before PullBatchRows.
  void SetSyncMode(bool sync) { sync_ = sync; }

  // Whether ps `p` owns a shard that the last batch touched (in sync mode: any shard).
  bool TouchesPs(size_t p) const;
  // Step 4 for ps `p`: the rows of `compact_gradient` (the compact model's gradient of the
  // table) that ps p's shards own, in one PushRows (in sync mode with the versions of
  // those shards as last pulled, in context.versions).
  // Errors: PsClient::PushRows'.
  absl::Status PushShardRows(size_t p, const Tensor& compact_gradient,
                             const PushContext& context) const;

 private:
  SparseEmbedding(const Model& model, VariableLayout table, std::vector<PsClient*> ps);
  absl::Status EnsureCapacity(int64_t rows);

  // One shard's part of the batch: ids()[begin, end) fall in its rows.
  struct ShardSpan {
    VariablePlacementEntry shard;
    size_t begin = 0;
    size_t end = 0;
  };

  const Model& model_;  // Not owned.
  const VariableLayout table_;
  const std::vector<PsClient*> ps_;  // Not owned.
  RowReader read_rows_;               // set: rows come from it, not from ps_
  const int64_t width_;
  std::unique_ptr<Model> compact_;
  int64_t capacity_ = 0;
  BatchRows rows_;
  bool sync_ = false;
  // Per ps: the spans of its shards the last batch touched (in sync mode, of all its
  // shards, empty ones too), and their versions as the last PullBatchRows got them.
  std::vector<std::vector<ShardSpan>> spans_by_ps_;
  std::vector<std::vector<int64_t>> versions_by_ps_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_SPARSE_EMBEDDING_H_
