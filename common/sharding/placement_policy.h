#ifndef PSTRAIN_COMMON_SHARDING_PLACEMENT_POLICY_H_
#define PSTRAIN_COMMON_SHARDING_PLACEMENT_POLICY_H_

// The job's "placement": how the chief is asked to split the variables and spread them
// over the ps tasks. This is the setting as the job spec states it (common/model/job_spec.h
// parses it once); the chief carries it out (common/sharding/placement.h).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

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

  bool operator==(const PlacementPolicy& other) const {
    return strategy == other.strategy && num_shards == other.num_shards &&
           min_shard_bytes == other.min_shard_bytes && max_shards == other.max_shards;
  }
};

// Reads a job spec's "placement" object:
//   {"strategy": "round_robin" | "size_balanced", "num_shards": N (>= 0),
//    "min_shard_bytes": B (>= 1), "max_shards": M (>= 1)}
// Every key is optional (defaults as in PlacementPolicy); null means all defaults.
// Errors: INVALID_ARGUMENT (one line starting "placement") for a non-object, an unknown
// key, an unknown strategy, a non-integer or out-of-range number.
absl::StatusOr<PlacementPolicy> PlacementPolicyFromJson(const nlohmann::json& value);

// The "placement" object PlacementPolicyFromJson reads back to `policy`.
nlohmann::json PlacementPolicyToJson(const PlacementPolicy& policy);

// "size_balanced, min_shard_bytes 262144, max_shards = number of ps", for logs.
std::string DescribePolicy(const PlacementPolicy& policy);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_SHARDING_PLACEMENT_POLICY_H_
