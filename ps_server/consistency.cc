#include "ps_server/consistency.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status ValidateConsistency(const ConsistencyConfig& config) {
  const ConsistencyMode mode = config.mode();
  if (mode == CONSISTENCY_ASYNC) return absl::OkStatus();
  if (mode != CONSISTENCY_BOUNDED_STALENESS && mode != CONSISTENCY_SYNC) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown consistency mode ", static_cast<int>(mode)));
  }
  // Bounded above too: a push waits up to this long holding a server thread.
  if (config.timeout_ms() < 1 || config.timeout_ms() > kMaxConsistencyTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrCat("consistency timeout_ms must be in [1, ",
                                                   kMaxConsistencyTimeoutMs, "], got ",
                                                   config.timeout_ms()));
  }
  if (mode == CONSISTENCY_BOUNDED_STALENESS && config.staleness() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("consistency staleness must be >= 0, got ", config.staleness()));
  }
  if (mode == CONSISTENCY_SYNC && config.replicas_to_aggregate() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "consistency replicas_to_aggregate must be >= 1, got ", config.replicas_to_aggregate()));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
