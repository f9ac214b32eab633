#ifndef PSTRAIN_COMMON_SHARDING_PLACEMENT_H_
#define PSTRAIN_COMMON_SHARDING_PLACEMENT_H_

// Which ps task holds which part of each variable: the chief's placement decision (the
// chief daemon's, or a custom loop's chief's through pstrain/).
//
// The chief computes the placement once, from the job's policy
// (common/sharding/placement_policy.h), creates the shards and sends the same entries to
// every worker; how a variable is cut into row shards and put back together is shared
// with the workers and tools in common/sharding/shard_layout.h.
//
// Everything here is a pure function of its arguments: safe from any thread.

#include <vector>

#include "absl/status/statusor.h"
#include "common/sharding/placement_policy.h"
#include "common/sharding/shard_layout.h"
#include "proto/chief.pb.h"

namespace pstrain {

// The policy that reproduces the original placement: round-robin, nothing split.
PlacementPolicy RoundRobinUnpartitioned();

// Splits and places `variables` on `num_ps` ps tasks. Returns one entry per shard, in
// the model's variable order and, within a variable, in row order; every field of the
// entry is set (see proto/chief.proto). Rows are divided as SplitIntoShards does.
// Errors: INVALID_ARGUMENT num_ps < 1, a negative num_shards or max_shards, a
// min_shard_bytes < 1, an unknown strategy, a duplicate or empty variable name, or a
// negative dimension.
absl::StatusOr<std::vector<VariablePlacementEntry>> PlaceVariables(
    const std::vector<VariableShape>& variables, int num_ps, const PlacementPolicy& policy);

// PlaceVariables with RoundRobinUnpartitioned(): variable i goes to ps i % num_ps.
// Errors: as PlaceVariables.
absl::StatusOr<std::vector<VariablePlacementEntry>> PlaceRoundRobin(
    const std::vector<VariableShape>& variables, int num_ps);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_SHARDING_PLACEMENT_H_
