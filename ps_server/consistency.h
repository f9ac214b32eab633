#ifndef PSTRAIN_PS_SERVER_CONSISTENCY_H_
#define PSTRAIN_PS_SERVER_CONSISTENCY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "proto/ps.pb.h"

namespace pstrain {

// Defaults of the job's "consistency" object.
inline constexpr int kDefaultStaleness = 2;
inline constexpr int64_t kDefaultConsistencyTimeoutMs = 5000;

// What a push tells the ps besides its gradients, for the consistency rules
// (ConsistencyConfig in proto/ps.proto).
struct PushContext {
  // The pushing worker ("worker 1"); empty = anonymous, never held back by staleness.
  std::string worker;
  // Position of the step within its epoch (bounded staleness compares workers in one epoch).
  int32_t epoch = 0;
  int64_t step = 0;
  // The version each gradient was computed at, aligned with the gradients. Sync mode
  // requires it; other modes ignore it.
  std::vector<int64_t> versions;
};

// Reads the job's "consistency" value (null = async) with defaults resolved:
// staleness 2, replicas_to_aggregate = `num_workers`, timeout_ms 5000.
// Errors: INVALID_ARGUMENT (one line naming the key) for a non-object, an unknown key or
//         mode, a negative staleness, replicas_to_aggregate < 1 or > num_workers, or
//         timeout_ms < 1.
absl::StatusOr<ConsistencyConfig> ConsistencyConfigFromJson(const nlohmann::json& value,
                                                            int num_workers);

// Checks a config as a ps receives it (already resolved; empty mode = async).
// Errors: INVALID_ARGUMENT unknown mode, negative staleness, sync with
//         replicas_to_aggregate < 1, or a non-async mode with timeout_ms < 1.
absl::Status ValidateConsistency(const ConsistencyConfig& config);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CONSISTENCY_H_
