#ifndef PSTRAIN_PS_SERVER_VARIABLE_SNAPSHOT_H_
#define PSTRAIN_PS_SERVER_VARIABLE_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "proto/ps.pb.h"

namespace pstrain {

// A variable's whole server-side state, for checkpoints (ReadState / RestoreState).
struct VariableSnapshot {
  std::string name;
  Tensor value;
  int64_t version = 0;
  // The optimizer's update count (Adam's bias correction, learning-rate schedules).
  int64_t iterations = 0;
  // The optimizer's slots by name ("momentum", "velocity", ...), each shaped like
  // `value`, in the optimizer's order.
  std::vector<NamedTensor> slots;
};

void SnapshotToProto(const VariableSnapshot& snapshot, VariableState* proto);

// Errors: INVALID_ARGUMENT a malformed value or slot tensor (named).
absl::StatusOr<VariableSnapshot> SnapshotFromProto(const VariableState& proto);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_VARIABLE_SNAPSHOT_H_
