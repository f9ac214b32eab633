#include "common/variable_snapshot.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {

void SnapshotToProto(const VariableSnapshot& snapshot, VariableState* proto) {
  proto->set_name(snapshot.name);
  snapshot.value.ToProto(proto->mutable_value());
  proto->set_version(snapshot.version);
  proto->set_iterations(snapshot.iterations);
  for (const NamedTensor& slot : snapshot.slots) {
    NamedSlot* out = proto->add_slots();
    out->set_name(slot.name);
    slot.tensor.ToProto(out->mutable_value());
  }
}

absl::StatusOr<VariableSnapshot> SnapshotFromProto(const VariableState& proto) {
  VariableSnapshot snapshot;
  snapshot.name = proto.name();
  absl::StatusOr<Tensor> value = Tensor::FromProto(proto.value());
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of \"", proto.name(), "\": ", value.status().message()));
  }
  snapshot.value = *std::move(value);
  snapshot.version = proto.version();
  snapshot.iterations = proto.iterations();
  for (const NamedSlot& slot : proto.slots()) {
    absl::StatusOr<Tensor> t = Tensor::FromProto(slot.value());
    if (!t.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("slot \"", slot.name(), "\" of \"",
                                                     proto.name(), "\": ", t.status().message()));
    }
    snapshot.slots.push_back({slot.name(), *std::move(t)});
  }
  return snapshot;
}

}  // namespace pstrain
