#ifndef PSTRAIN_COMMON_SHARDING_SHARDS_BY_PS_H_
#define PSTRAIN_COMMON_SHARDING_SHARDS_BY_PS_H_

// The shards of a layout (common/sharding/shard_layout.h) grouped by the ps that holds
// them, and the two directions every reader and writer of a sharded model takes:
//   gather:  read each ps's shards (all ps at once) and put whole variables back together
//            (the chief's evaluation and checkpoints, a worker's pull);
//   scatter: cut whole variables into each ps's shards (creating the variables, restoring
//            a checkpoint).
// How a ps is read is the caller's (a PsClient, an in-process store): this package knows
// nothing of the ps.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sharding/shard_layout.h"
#include "common/tensor.h"
#include "common/variable_snapshot.h"

namespace pstrain {

// A shard as one ps holds it: the index of its variable in the layout, and its entry.
struct ShardRef {
  int variable = 0;
  VariablePlacementEntry entry;
};

// The shards each of `num_ps` ps tasks holds, in layout order (variable by variable, each
// in row order): result[p] is ps p's, possibly empty. Every ps index of `layout` must be in
// [0, num_ps) (ResolveLayout checks it).
std::vector<std::vector<ShardRef>> ShardsByPs(const std::vector<VariableLayout>& layout,
                                              int num_ps);

// The shards' names, in order: what a ps is asked for.
std::vector<std::string> ShardNames(const std::vector<ShardRef>& shards);

// Full tensors of `layout`'s variables, ready for shards to be put in: a split variable's
// is allocated (zeros) so that threads may copy rows into it at once; a whole one is left
// empty, to be moved in.
std::vector<Tensor> EmptyFullTensors(const std::vector<VariableLayout>& layout);

// Puts shard `ref`'s `value` into `(*full)[ref.variable]` (EmptyFullTensors' shape): a
// whole variable is moved in, a split one's rows copied. Threads may put different shards
// at once.
// Errors: INVALID_ARGUMENT the value does not have the shard's shape (named).
absl::Status PutShard(const std::vector<VariableLayout>& layout, const ShardRef& ref,
                      Tensor value, std::vector<Tensor>* full);

// Reads shard values from ps `ps`: `names` in order, one tensor per name. GatherValues
// calls it for every ps at once, each call on its own thread: it must be thread-safe.
using ReadShardValues = std::function<absl::StatusOr<std::vector<Tensor>>(
    int ps, const std::vector<std::string>& names)>;
// Reads shard states (value, slots, counts) from ps `ps`: `names` in order. Called as
// ReadShardValues is, for every ps at once.
using ReadShardStates = std::function<absl::StatusOr<std::vector<VariableSnapshot>>(
    int ps, const std::vector<std::string>& names)>;

// Every variable of `layout` whole, in layout order: each ps that holds a shard is read
// once, all at once, and the shards reassembled.
// Errors: the first failed read (in ps order); INTERNAL a ps answered another number of
//         values than it was asked for; INVALID_ARGUMENT a value of the wrong shape.
absl::StatusOr<std::vector<Tensor>> GatherValues(const std::vector<VariableLayout>& layout,
                                                 int num_ps, const ReadShardValues& read);

// Every variable's whole state, in layout order, named by the variable: value and each
// optimizer slot reassembled from the shards; iterations and version the largest of its
// shards' (every push updates every shard of a variable, so they agree unless one shard
// missed a push).
// Errors: as GatherValues; INTERNAL the shards of a variable keep different slots or a ps
//         answered for another shard than asked.
absl::StatusOr<std::vector<VariableSnapshot>> GatherStates(
    const std::vector<VariableLayout>& layout, int num_ps, const ReadShardStates& read);

// Each ps's shards of whole `values` (in layout order), named as the ps holds them:
// result[p] for ps p. A whole variable's value is moved, a split one's rows copied.
// Errors: INVALID_ARGUMENT a value count or shape that does not fit the layout (named).
absl::StatusOr<std::vector<std::vector<NamedTensor>>> ScatterValues(
    const std::vector<VariableLayout>& layout, int num_ps, std::vector<Tensor> values);

// Each ps's shards of whole variable states (`states[i]` for layout variable i): value and
// slots sliced by rows, iterations and version copied, named as the ps holds them.
// Errors: INVALID_ARGUMENT a state count or a value or slot shape that does not fit the
//         layout (named).
absl::StatusOr<std::vector<std::vector<VariableSnapshot>>> ScatterStates(
    const std::vector<VariableLayout>& layout, int num_ps,
    const std::vector<VariableSnapshot>& states);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_SHARDING_SHARDS_BY_PS_H_
