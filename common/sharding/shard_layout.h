#ifndef PSTRAIN_COMMON_SHARDING_SHARD_LAYOUT_H_
#define PSTRAIN_COMMON_SHARDING_SHARD_LAYOUT_H_

// How a variable is cut into shards and put back together.
//
// A variable may be partitioned along its FIRST axis into shards of contiguous rows (as
// TensorFlow's variable partitioners do), so that one large embedding or kernel does not
// sit on, and bottleneck, a single ps. Each shard is a variable of its own on its ps,
// named "<variable>/part_<i>"; an unsplit variable keeps its plain name. One
// VariablePlacementEntry (proto/chief.proto) describes each shard. The chief decides how
// many shards each variable gets and which ps holds each (common/sharding/placement.h) and sends the
// entries to every worker; the chief, the workers and the tools read them here.
//
// Everything here is a pure function of its arguments: safe from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "proto/chief.pb.h"

namespace pstrain {

struct VariableShape {
  std::string name;
  std::vector<int64_t> shape;
};

// The entries of `variable` cut into `num_shards` shards of contiguous rows (ps_index 0:
// the caller places them). Rows are divided as evenly as possible, the first shards
// taking one extra row each when the rows do not divide; a variable never gets more
// shards than rows (a rank-0 variable counts as one row, and a variable with at most one
// row is never split). Every other field of each entry is set.
std::vector<VariablePlacementEntry> SplitIntoShards(const VariableShape& variable,
                                                    int num_shards);

// `entry` with every field set: an entry written before partitioning existed (no
// variable_name) describes the whole variable `name`, all its rows, in one shard.
VariablePlacementEntry NormalizedEntry(const VariablePlacementEntry& entry);

// One model variable and its shards, in row order.
struct VariableLayout {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<VariablePlacementEntry> shards;
  // True when the single shard covers the whole variable (no slicing needed).
  bool whole() const { return shards.size() == 1 && shards[0].num_shards() <= 1; }
};

// Groups `placement` by variable, in the order of `variables`, and checks that it fits:
// every variable is placed, each shard has the variable's full shape, the shards'
// rows are contiguous from 0 and cover every row exactly once, and each ps index is in
// [0, num_ps). Entries written before partitioning existed (no variable_name) are read
// as one whole-variable shard. The returned entries have every field set.
// Errors: INVALID_ARGUMENT for any mismatch, naming the variable.
absl::StatusOr<std::vector<VariableLayout>> ResolveLayout(
    const std::vector<VariableShape>& variables,
    absl::Span<const VariablePlacementEntry> placement, int num_ps);

// The rows of `full` that `shard` covers, as a tensor of the shard's shape (one copy).
// Errors: INVALID_ARGUMENT `full` does not have the shard's full shape or the rows are
// out of range.
absl::StatusOr<Tensor> SliceShard(const Tensor& full, const VariablePlacementEntry& shard);

// Writes `shard_value` into its rows of `full`, in place. `full` must already have the
// variable's full shape: concurrent calls for different shards of the same tensor touch
// disjoint memory and are safe.
// Errors: INVALID_ARGUMENT a shape differs from the entry's or the rows are out of range.
absl::Status CopyShardInto(const Tensor& shard_value, const VariablePlacementEntry& shard,
                           Tensor* full);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_SHARDING_SHARD_LAYOUT_H_
