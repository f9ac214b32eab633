#ifndef PSTRAIN_PS_SERVER_PS_CLIENT_H_
#define PSTRAIN_PS_SERVER_PS_CLIENT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/checkpoint/keras_weights_h5.h"
#include "common/checkpoint/shard_files.h"
#include "common/model/row_initializer.h"
#include "common/tensor.h"
#include "common/variable_snapshot.h"
#include "proto/ps.pb.h"
#include "ps_server/consistency.h"
#include "ps_server/sparse_rows.h"

namespace pstrain {

// A connection to one ps task, as workers and the chief see it. Implementations: a gRPC
// client (ps_server/rpc/grpc_ps_client.h) and an in-process one over a VariableStore
// (ps_server/local_ps_client.h) for tests. Every call is bounded by a deadline; errors
// start with name() so the failing task is always named. Thread-safe.
class PsClient {
 public:
  virtual ~PsClient() = default;

  // "ps task 1 (host:port)".
  virtual std::string name() const = 0;

  // Creates variables and sets the optimizer and consistency mode (see
  // ps_server/variable_store.h).
  virtual absl::Status CreateVariables(std::vector<NamedTensor> variables,
                                       const OptimizerConfig& optimizer,
                                       const ConsistencyConfig& consistency) = 0;
  // As above, async.
  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               const OptimizerConfig& optimizer) {
    return CreateVariables(std::move(variables), optimizer, ConsistencyConfig());
  }
  // As above, and also the `drawn` variables, whose values the ps draws itself from their
  // initializers (VariableStore::CreateVariables): only how to draw them travels. A
  // client that cannot send initializers answers UNIMPLEMENTED when `drawn` is not empty.
  virtual absl::Status CreateVariables(std::vector<NamedTensor> variables,
                                       std::vector<InitialShard> drawn,
                                       const OptimizerConfig& optimizer,
                                       const ConsistencyConfig& consistency) {
    if (!drawn.empty()) {
      return absl::UnimplementedError(name() + ": cannot send initializers");
    }
    return CreateVariables(std::move(variables), optimizer, consistency);
  }

  // As above, each of `shards` read by the ps itself from its rows of `file`'s weights
  // (ps_server/keras_rows.h). A ps that cannot reach the file answers
  // FAILED_PRECONDITION and creates nothing; a client or a ps that cannot carry the
  // request answers UNIMPLEMENTED. (The caller then sends the values.)
  virtual absl::Status CreateVariablesFromKeras(const KerasWeightsFile&,
                                                std::vector<KerasRowsRequest>,
                                                const OptimizerConfig&, const ConsistencyConfig&) {
    return absl::UnimplementedError(name() + ": cannot ask for rows of a .keras file");
  }

  // `versions` (may be null) gets each variable's version.
  virtual absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names,
                                                   std::vector<int64_t>* versions) = 0;
  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names) {
    return Pull(names, nullptr);
  }

  virtual absl::Status Push(absl::Span<const NamedTensor> gradients, int64_t step) = 0;

  // Push, then pull the same variables, in one round trip; `versions` (may be null) gets
  // the pulled versions. In sync or bounded_staleness mode the ps may hold the call for
  // up to the mode's timeout_ms, so the deadline must exceed it.
  virtual absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                                       const PushContext& context,
                                                       std::vector<int64_t>* versions) = 0;
  // As above, an anonymous push at `step` (async semantics).
  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                               int64_t step) {
    PushContext context;
    context.step = step;
    return PushPull(gradients, context, nullptr);
  }
  virtual absl::StatusOr<PsStatusResponse> GetStatus() = 0;

  // Value, version, optimizer iterations and slots of `names` in order (empty = every
  // variable on the ps, by name), each consistent with itself. Errors: as
  // VariableStore::ReadState (NOT_FOUND unknown variable), or the transport's.
  virtual absl::StatusOr<std::vector<VariableSnapshot>> ReadState(
      absl::Span<const std::string> names) = 0;
  // Replaces values, slots and iterations, all-or-nothing. Errors: as
  // VariableStore::RestoreState (NOT_FOUND, INVALID_ARGUMENT), or the transport's.
  virtual absl::Status RestoreState(const std::vector<VariableSnapshot>& snapshots) = 0;
  virtual absl::Status Shutdown(const std::string& reason) = 0;

  // Row-sparse traffic (sparse_rows.h; the ps's PullRows and PushRows): the rows asked of
  // each variable, in order, as [rows, row shape...], and `versions` (may be null) each
  // variable's version; and a push of row gradients (repeated rows summed on the ps).
  // Errors: as VariableStore::PullRows / PushRows, or the transport's; a client that does
  // not carry them answers UNIMPLEMENTED.
  virtual absl::StatusOr<std::vector<Tensor>> PullRows(absl::Span<const RowsRequest>,
                                                       std::vector<int64_t>*) {
    return absl::UnimplementedError(name() + ": no row-sparse pulls");
  }
  virtual absl::Status PushRows(absl::Span<const SparseGradient>, const PushContext&) {
    return absl::UnimplementedError(name() + ": no row-sparse pushes");
  }

  // Sharded checkpoints (the ps's WriteCheckpointShard and RestoreCheckpointShard): the
  // ps writes `slices` (its shards) into the temporary checkpoint folder `checkpoint` of
  // the folder it shares with the chief, as file shard-<ps_index>, and answers what it
  // wrote; or restores `slices` from committed checkpoint `checkpoint`.
  // Errors: as CheckpointShards (ps_server/checkpoint_shards.h), or the transport's; a
  // client or a ps that does not carry them answers UNIMPLEMENTED, a ps without a
  // checkpoint folder FAILED_PRECONDITION.
  virtual absl::StatusOr<ShardFile> WriteCheckpointShard(const std::string&, int,
                                                         const std::vector<ShardSlice>&) {
    return absl::UnimplementedError(name() + ": no sharded checkpoints");
  }
  virtual absl::Status RestoreCheckpointShard(const std::string&, const std::vector<ShardSlice>&) {
    return absl::UnimplementedError(name() + ": no sharded checkpoints");
  }
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_PS_CLIENT_H_
