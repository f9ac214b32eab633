#ifndef PSTRAIN_PSTRAIN_INTERNAL_PLACEMENT_FINGERPRINT_H_
#define PSTRAIN_PSTRAIN_INTERNAL_PLACEMENT_FINGERPRINT_H_

#include <cstdint>
#include <vector>

#include "proto/chief.pb.h"

namespace pstrain::distribute::internal {

// A fingerprint of a placement (its entries in order), equal on every task that placed
// the same variables the same way: the chief's scheduled functions carry it and a worker
// refuses one made for another placement. 0 for no placement.
uint64_t PlacementFingerprint(const std::vector<VariablePlacementEntry>& placement);

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_PLACEMENT_FINGERPRINT_H_
