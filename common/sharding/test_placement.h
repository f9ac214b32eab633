#ifndef PSTRAIN_COMMON_SHARDING_TEST_PLACEMENT_H_
#define PSTRAIN_COMMON_SHARDING_TEST_PLACEMENT_H_

// Placements written out for the tests of packages that do not place variables (only the
// chief and the library may use common/sharding/placement.h): common/, worker/.

#include <vector>

#include "common/sharding/shard_layout.h"
#include "proto/chief.pb.h"

namespace pstrain {

// Every variable cut into `num_shards` shards (SplitIntoShards: fewer when it has fewer
// rows; 1 leaves it whole), the shards placed one after another onto ps 0, 1, ...,
// num_ps - 1: what the chief's round-robin policy with a fixed shard count gives.
std::vector<VariablePlacementEntry> RoundRobinShardsForTest(
    const std::vector<VariableShape>& variables, int num_ps, int num_shards);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_SHARDING_TEST_PLACEMENT_H_
