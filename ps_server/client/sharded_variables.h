#ifndef PSTRAIN_PS_SERVER_CLIENT_SHARDED_VARIABLES_H_
#define PSTRAIN_PS_SERVER_CLIENT_SHARDED_VARIABLES_H_

#include <string>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/model/model.h"
#include "common/model/row_initializer.h"
#include "common/sharding/placement_policy.h"
#include "common/sharding/shard_layout.h"
#include "common/tensor.h"
#include "common/training/training_state.h"
#include "common/variable_snapshot.h"
#include "proto/chief.pb.h"
#include "proto/ps.pb.h"
#include "ps_server/ps_client.h"

namespace pstrain {

// The model's variables as the ps tasks hold them, seen from the one task that places them
// (the chief daemon, or the chief of a custom loop under parameter_server): where each shard
// lives (the placement, decided once by Create), the shards created (each ps draws its
// own rows of the initial values: see Create), and whole variables moved to and from the
// shards (pull for evaluation, read and restore the training state for checkpoints,
// recreate the shards of a ps that came back empty).
// Knows nothing of gRPC: the ps are PsClients. Every method may be called from any thread;
// the ps calls of one method run concurrently, one per ps.
class ShardedVariables {
 public:
  // `model` (its trainable variables and initial values) and the clients are not owned and
  // must outlive this. Every ps is created with `optimizer` and `consistency` (resolved for
  // the cluster).
  ShardedVariables(const Model* model, std::vector<PsClient*> ps, OptimizerConfig optimizer,
                   ConsistencyConfig consistency);

  // Places the variables by `policy` (common/sharding/placement.h) and creates every shard
  // on its ps with its rows of the model's initial values for `seed`: each ps is sent how
  // to draw its rows (Model::InitialValuesOf: the same values the one-process trainer
  // draws, however the variable is split), never the values, so no task holds a whole
  // variable. Initial values set by SetInitialValues are sliced and sent instead; a file
  // set by SetInitialWeightsFile is read by each ps, its rows only. Called
  // once, before any other method but placement().
  // Errors: PlaceVariables' (a bad policy); the first failed CreateVariables (naming the ps).
  absl::Status Create(const PlacementPolicy& policy, uint64_t seed) ABSL_LOCKS_EXCLUDED(mu_);

  // Values that Create and Recreate use instead of the model's initial values (a .keras
  // model's weights, JobSpec::initial_weights), in the model's variables() order; null
  // (the default) has each ps draw them from the seed. Call before Create. These are held
  // whole here and sliced for the ps (SetInitialWeightsFile has each ps read its rows).
  void SetInitialValues(std::shared_ptr<const std::vector<Tensor>> values) {
    initial_values_ = std::move(values);
  }

  // The .keras file (absolute and normalized: JobSpec::initial_weights_file, read without
  // its weights) whose weights Create and Recreate start from: each ps reads only its
  // own rows of it (PsClient::CreateVariablesFromKeras), so no task holds a whole
  // variable. A ps that cannot reach the file (another machine, no shared volume) is sent
  // its rows instead, which this task then reads from the file whole, once, and keeps.
  // Which way each ps took is logged. Call before Create; SetInitialValues' values, when
  // set, are used instead.
  void SetInitialWeightsFile(std::string path) { initial_weights_file_ = std::move(path); }

  // One entry per shard (empty before Create), as the workers are sent it.
  std::vector<VariablePlacementEntry> placement() const ABSL_LOCKS_EXCLUDED(mu_);

  // The variables and their shards, in the model's order.
  // Errors: INVALID_ARGUMENT before Create.
  absl::StatusOr<std::vector<VariableLayout>> Layout() const ABSL_LOCKS_EXCLUDED(mu_);

  // Every variable's current value, whole, in the model's order. `skip_first`: variable 0
  // (a row-sparse Embedding table, read by rows: sparse_embedding.h) is not pulled, and
  // an empty tensor stands in its place.
  // Errors: the first failed Pull (naming the ps); GatherValues'.
  absl::StatusOr<std::vector<Tensor>> Pull(bool skip_first = false) const;

  // Every variable's whole state (value, optimizer slots and counts), in the model's order.
  // Errors: the first failed ReadState (naming the ps); GatherStates'.
  absl::StatusOr<std::vector<VariableSnapshot>> ReadStates() const;

  // Replaces every shard's value, slots and counts with `state`'s, sliced for the current
  // placement (which may differ from the one that wrote it). `source` names the state in
  // errors ("checkpoint <path>").
  // Errors: INVALID_ARGUMENT the state does not fit the model (VariablesForModel); the
  //         first failed RestoreState (naming the ps).
  absl::Status Restore(const TrainingState& state, const std::string& source) const;

  // Which ps answer, and which of those lack a shard they should hold (restarted empty).
  struct Census {
    std::vector<std::string> unreachable;  // one message per ps that did not answer
    std::vector<int> emptied;              // ps indices
  };
  absl::StatusOr<Census> TakeCensus() const;

  // Creates the shards of ps `p` again: from `state`'s values, slots and counts, or, when
  // `state` is null, from the initial values for `seed`, which the ps draws again for its
  // rows (exactly what Create gave it), or SetInitialValues' values sliced.
  // Errors: as Restore, or CreateVariables'.
  absl::Status Recreate(int p, const TrainingState* state, const std::string& source,
                        uint64_t seed) const;

  // Sharded checkpoints (format v2): each ps writes and restores its own shards in the
  // checkpoint folder it shares with the chief (PsClient::WriteCheckpointShard).
  //
  // Empty when every ps says it can (PsStatusResponse.checkpoint_shards); otherwise why
  // not, naming the first ps that cannot. Errors: the first failed GetStatus.
  absl::StatusOr<std::string> WhyNoShardedCheckpoints() const;
  // Every ps that holds shards writes them into the temporary folder `temp` (a name, in
  // the shared folder), all at once; one file per ps, in ps order.
  // Errors: the first failed write (naming the ps).
  absl::StatusOr<std::vector<ShardFile>> WriteCheckpointShards(const std::string& temp) const;
  // Ps `p` (every ps when p < 0) restores its shards from committed checkpoint `name` in
  // the shared folder, reading its rows whatever number of ps wrote it.
  // Errors: the first failed restore (naming the ps).
  absl::Status RestoreCheckpointShards(const std::string& name, int p = -1) const;

  int num_ps() const { return static_cast<int>(ps_.size()); }
  // "ps task 1 (host:port)", as errors and logs name ps `p`.
  std::string ps_name(int p) const { return ps_[p]->name(); }

 private:
  // Each ps's shards as checkpoint slices (index: the ps).
  absl::StatusOr<std::vector<std::vector<ShardSlice>>> SlicesByPs() const;
  // The model's variables as (name, shape), in its order.
  std::vector<VariableShape> Shapes() const;

  const Model* const model_;        // Not owned.
  const std::vector<PsClient*> ps_;  // Not owned.
  const OptimizerConfig optimizer_;
  const ConsistencyConfig consistency_;

  // What each ps's shards are created from (index: the ps): initial_values_ sliced into
  // `values`, or, without them, the rows each ps draws itself in `drawn`; the other is
  // empty.
  struct InitialShards {
    std::vector<std::vector<NamedTensor>> values;
    std::vector<std::vector<InitialShard>> drawn;
  };
  // Errors: ScatterValues' (initial values that do not fit the model).
  absl::StatusOr<InitialShards> InitialShardsFor(const std::vector<VariableLayout>& layout,
                                                 uint64_t seed) const;
  // Creates ps `p`'s shards of `layout` from initial_weights_file_: the ps reads its rows,
  // or, when it cannot reach the file, is sent them.
  absl::Status CreateFromFile(size_t p, const std::vector<VariableLayout>& layout) const;
  // initial_weights_file_'s weights whole, read on first use and kept.
  absl::StatusOr<std::shared_ptr<const std::vector<Tensor>>> WholeFileWeights() const
      ABSL_LOCKS_EXCLUDED(file_mu_);
  // Every shard of `layout`, by ps, as its rows of its variable's initializer for `seed`.
  std::vector<std::vector<InitialShard>> DrawnShards(const std::vector<VariableLayout>& layout,
                                                     uint64_t seed) const;

  std::shared_ptr<const std::vector<Tensor>> initial_values_;  // null: from the seed
  std::string initial_weights_file_;  // empty: none
  mutable absl::Mutex file_mu_;
  mutable std::shared_ptr<const std::vector<Tensor>> file_weights_ ABSL_GUARDED_BY(file_mu_);
  mutable absl::Mutex mu_;
  std::vector<VariablePlacementEntry> placement_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_SHARDED_VARIABLES_H_
