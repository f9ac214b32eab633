#ifndef PSTRAIN_COMMON_VARIABLE_SNAPSHOT_H_
#define PSTRAIN_COMMON_VARIABLE_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "proto/ps.pb.h"

namespace pstrain {

// One variable's whole training state: its value and the optimizer's state for it. A ps
// reads and restores its shards' state as snapshots (ReadState / RestoreState, where it
// travels as the VariableState message), the chief reassembles them into whole variables
// for a checkpoint (common/sharding), and the one-process trainer keeps its state in the
// same shape (common/training/training_state.h).
struct VariableSnapshot {
  std::string name;
  Tensor value;
  // Updates applied to the variable (a ps's version; the one-process trainer's step count).
  int64_t version = 0;
  // The optimizer's update count (Adam's bias correction, learning-rate schedules).
  int64_t iterations = 0;
  // The optimizer's slots by name ("momentum", "velocity", ...), each shaped like
  // `value`, in the optimizer's order.
  std::vector<NamedTensor> slots;
};

// The snapshot as the wire's VariableState, and back.
void SnapshotToProto(const VariableSnapshot& snapshot, VariableState* proto);

// Errors: INVALID_ARGUMENT a malformed value or slot tensor (named).
absl::StatusOr<VariableSnapshot> SnapshotFromProto(const VariableState& proto);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_VARIABLE_SNAPSHOT_H_
