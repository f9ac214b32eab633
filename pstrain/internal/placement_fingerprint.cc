#include "pstrain/internal/placement_fingerprint.h"

namespace pstrain::distribute::internal {

uint64_t PlacementFingerprint(const std::vector<VariablePlacementEntry>& placement) {
  // FNV-1a over every entry's bytes: the same entries give the same number everywhere.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const VariablePlacementEntry& entry : placement) {
    for (unsigned char c : entry.SerializeAsString()) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    h ^= 0xff;
    h *= 0x100000001b3ULL;
  }
  return placement.empty() ? 0 : h;
}

}  // namespace pstrain::distribute::internal
