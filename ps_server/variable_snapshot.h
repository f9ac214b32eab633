#ifndef PSTRAIN_PS_SERVER_VARIABLE_SNAPSHOT_H_
#define PSTRAIN_PS_SERVER_VARIABLE_SNAPSHOT_H_

// A variable's server-side state on the wire (ReadState / RestoreState): the
// VariableSnapshot every trainer shares, as the ps's VariableState message.

#include "absl/status/statusor.h"
#include "common/training/variable_snapshot.h"
#include "proto/ps.pb.h"

namespace pstrain {

void SnapshotToProto(const VariableSnapshot& snapshot, VariableState* proto);

// Errors: INVALID_ARGUMENT a malformed value or slot tensor (named).
absl::StatusOr<VariableSnapshot> SnapshotFromProto(const VariableState& proto);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_VARIABLE_SNAPSHOT_H_
