#ifndef PSTRAIN_PS_SERVER_PLACEMENT_H_
#define PSTRAIN_PS_SERVER_PLACEMENT_H_

// Which ps task holds which part of each variable.
//
// A variable may be partitioned along its FIRST axis into shards of contiguous rows (as
// TensorFlow's variable partitioners do), so that one large embedding or kernel does not
// sit on, and bottleneck, a single ps. Each shard is a variable of its own on its ps,
// named "<variable>/part_<i>"; an unsplit variable keeps its plain name. The chief
// computes the placement once (PlaceVariables), creates the shards, and sends the same
// entries to every worker, which reassembles shards into full tensors (ResolveLayout,
// CopyShardInto) and slices gradients back into shards (SliceShard).
//
// Everything here is a pure function of its arguments: safe from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"
#include "proto/chief.pb.h"

namespace pstrain {

struct VariableShape {
  std::string name;
  std::vector<int64_t> shape;
};

enum class PlacementStrategy {
  // Shards in the model's variable order, shard after shard, onto ps 0, 1, 2, ...
  // (TensorFlow's default ParameterServerStrategy placement when nothing is split).
  kRoundRobin,
  // Largest shard first onto the least-loaded ps (by bytes; ties go to the lowest ps
  // index, equal sizes keep model order), so the ps tasks hold similar byte counts.
  kSizeBalanced,
};

// How to place and partition. The defaults are the chief's default policy.
struct PlacementPolicy {
  PlacementStrategy strategy = PlacementStrategy::kSizeBalanced;
  // > 0: split every variable into exactly this many shards (fewer when it has fewer
  // rows), ignoring the two size knobs below. 0: partition by size.
  int num_shards = 0;
  // Partition by size: a variable of B bytes gets min(max_shards, rows,
  // floor(B / min_shard_bytes)) shards, at least 1, so no shard is smaller than this
  // (except that a variable smaller than it stays whole). Must be >= 1.
  int64_t min_shard_bytes = 256 << 10;
  // Upper bound for size partitioning; 0 means the number of ps tasks. 1 turns size
  // partitioning off.
  int max_shards = 0;
};

// The policy that reproduces the original placement: round-robin, nothing split.
PlacementPolicy RoundRobinUnpartitioned();

// Reads a job spec's "placement" object:
//   {"strategy": "round_robin" | "size_balanced", "num_shards": N (>= 0),
//    "min_shard_bytes": B (>= 1), "max_shards": M (>= 1)}
// Every key is optional (defaults as in PlacementPolicy); null means all defaults.
// Errors: INVALID_ARGUMENT (one line starting "placement") for a non-object, an unknown
// key, an unknown strategy, a non-integer or out-of-range number.
absl::StatusOr<PlacementPolicy> PlacementPolicyFromJson(const nlohmann::json& value);

// "size_balanced, min_shard_bytes 262144, max_shards = number of ps", for logs.
std::string DescribePolicy(const PlacementPolicy& policy);

// Splits and places `variables` on `num_ps` ps tasks. Returns one entry per shard, in
// the model's variable order and, within a variable, in row order; every field of the
// entry is set (see proto/chief.proto). Rows are divided as evenly as possible, the
// first shards taking one extra row each when the rows do not divide; a variable never
// gets more shards than rows (a rank-0 variable counts as one row).
// Errors: INVALID_ARGUMENT num_ps < 1, a negative num_shards or max_shards, a
// min_shard_bytes < 1, an unknown strategy, a duplicate or empty variable name, or a
// negative dimension.
absl::StatusOr<std::vector<VariablePlacementEntry>> PlaceVariables(
    const std::vector<VariableShape>& variables, int num_ps, const PlacementPolicy& policy);

// PlaceVariables with RoundRobinUnpartitioned(): variable i goes to ps i % num_ps.
// Errors: as PlaceVariables.
absl::StatusOr<std::vector<VariablePlacementEntry>> PlaceRoundRobin(
    const std::vector<VariableShape>& variables, int num_ps);

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

#endif  // PSTRAIN_PS_SERVER_PLACEMENT_H_
