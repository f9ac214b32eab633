#include "common/sharding/test_placement.h"

#include <utility>

namespace pstrain {

std::vector<VariablePlacementEntry> RoundRobinShardsForTest(
    const std::vector<VariableShape>& variables, int num_ps, int num_shards) {
  std::vector<VariablePlacementEntry> placement;
  for (const VariableShape& v : variables) {
    for (VariablePlacementEntry& e : SplitIntoShards(v, num_shards)) {
      e.set_ps_index(static_cast<int>(placement.size() % num_ps));
      placement.push_back(std::move(e));
    }
  }
  return placement;
}

}  // namespace pstrain
