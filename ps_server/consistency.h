#ifndef PSTRAIN_PS_SERVER_CONSISTENCY_H_
#define PSTRAIN_PS_SERVER_CONSISTENCY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/wire_precision.h"
#include "proto/ps.pb.h"

namespace pstrain {

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
  // Names the push so that a retry of it is applied at most once (PushRequest.request_id);
  // 0 = no id.
  uint64_t request_id = 0;
  // How the gradients and the values pulled back travel (the job's "wire_dtype"): the
  // pusher has already rounded the gradients (with error feedback, common/wire_precision.h);
  // a gRPC client sends them and asks for the values in this precision, an in-process one
  // rounds the values as the wire would. The ps itself never sees it.
  WirePrecision precision = WirePrecision::kFloat32;
};

// Longest consistency wait a ps accepts (one hour): a push waits up to timeout_ms on a
// server thread, so it must not be unbounded.
inline constexpr int64_t kMaxConsistencyTimeoutMs = int64_t{3600} * 1000;

// Checks a config as a ps receives it (the chief resolved it: see
// common/training/consistency_config.h).
// Errors: INVALID_ARGUMENT an unknown mode (its number named), a negative staleness, sync
//         with replicas_to_aggregate < 1, or a non-async mode with timeout_ms outside
//         [1, kMaxConsistencyTimeoutMs].
absl::Status ValidateConsistency(const ConsistencyConfig& config);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CONSISTENCY_H_
