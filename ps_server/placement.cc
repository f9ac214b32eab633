#include "ps_server/placement.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<std::vector<VariablePlacementEntry>> PlaceRoundRobin(
    const std::vector<VariableShape>& variables, int num_ps) {
  if (num_ps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot place variables on ", num_ps, " ps tasks"));
  }
  std::vector<VariablePlacementEntry> placement;
  placement.reserve(variables.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    VariablePlacementEntry entry;
    entry.set_name(variables[i].name);
    entry.set_ps_index(static_cast<int>(i % num_ps));
    for (int64_t d : variables[i].shape) entry.add_shape(d);
    placement.push_back(std::move(entry));
  }
  return placement;
}

}  // namespace pstrain
