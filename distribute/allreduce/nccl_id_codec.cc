#include "distribute/allreduce/nccl_id_codec.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain {

std::vector<float> EncodeNcclUniqueId(absl::Span<const uint8_t> id) {
  std::vector<float> out(id.size());
  for (size_t i = 0; i < id.size(); ++i) out[i] = static_cast<float>(id[i]);
  return out;
}

absl::StatusOr<std::vector<uint8_t>> DecodeNcclUniqueId(absl::Span<const float> encoded) {
  if (encoded.size() != static_cast<size_t>(kNcclUniqueIdBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id: expected ",
                                                   kNcclUniqueIdBytes, " values, got ",
                                                   encoded.size()));
  }
  std::vector<uint8_t> id(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    const float v = encoded[i];
    // NaN fails every comparison, so it is rejected here too.
    if (!(v >= 0.0f && v <= 255.0f) || std::floor(v) != v) {
      return absl::InvalidArgumentError(absl::StrCat("NCCL unique id: byte ", i, " is ", v,
                                                     ", not an integer in 0..255"));
    }
    id[i] = static_cast<uint8_t>(v);
  }
  return id;
}

}  // namespace pstrain
