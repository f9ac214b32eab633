#ifndef PSTRAIN_COMMON_TRAINING_CONSISTENCY_CONFIG_H_
#define PSTRAIN_COMMON_TRAINING_CONSISTENCY_CONFIG_H_

// The job's "consistency": how the ps tasks order the workers' pushes. The job spec
// parses it once (common/model/job_spec.h) into the ConsistencyConfig message the chief
// sends every ps (proto/ps.proto); the chief resolves the defaults that depend on the
// cluster (ResolveConsistency) and every reader compares the mode as an enum.
//
//   "consistency": {"mode": "async" | "bounded_staleness" | "sync",
//                   "staleness": S (>= 0), "replicas_to_aggregate": R (>= 1),
//                   "timeout_ms": T (>= 1)}

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/ps.pb.h"

namespace pstrain {

// Defaults of the job's "consistency" object.
inline constexpr int kDefaultStaleness = 2;
inline constexpr int64_t kDefaultConsistencyTimeoutMs = 5000;

// "async", "bounded_staleness" or "sync", as a job spec names the mode; a value this
// build does not know (from a newer peer) as "unknown mode N".
std::string ConsistencyModeName(ConsistencyMode mode);

// The mode a job spec or a flag names ("async", "bounded_staleness", "sync").
// Errors: INVALID_ARGUMENT any other name (quoted in the one-line message).
absl::StatusOr<ConsistencyMode> ParseConsistencyMode(const std::string& name);

// Reads the job's "consistency" value (null = async) with the defaults that do not
// depend on the cluster: staleness 2, timeout_ms 5000, replicas_to_aggregate 0 (every
// worker, resolved by ResolveConsistency).
// Errors: INVALID_ARGUMENT (one line naming the key, and the value for an unknown mode)
//         for a non-object, an unknown key or mode, a negative staleness,
//         replicas_to_aggregate < 1, or timeout_ms < 1.
absl::StatusOr<ConsistencyConfig> ConsistencyConfigFromJson(const nlohmann::json& value);

// The "consistency" object ConsistencyConfigFromJson reads back to `config`.
nlohmann::json ConsistencyConfigToJson(const ConsistencyConfig& config);

// `config` for a job of `num_workers` workers, as every ps receives it:
// replicas_to_aggregate 0 becomes num_workers.
// Errors: INVALID_ARGUMENT replicas_to_aggregate > num_workers (one line naming the key).
absl::StatusOr<ConsistencyConfig> ResolveConsistency(const ConsistencyConfig& config,
                                                     int num_workers);

// "sync, aggregating 2 gradients, timeout 5000 ms" or "bounded_staleness, staleness 1,
// timeout 5000 ms", for the chief's log; "async" for async.
std::string DescribeConsistency(const ConsistencyConfig& config);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_CONSISTENCY_CONFIG_H_
