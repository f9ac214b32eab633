#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_NCCL_ID_CODEC_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_NCCL_ID_CODEC_H_

// NCCL's unique id (ncclUniqueId: 128 opaque bytes made by rank 0) travels to the other
// ranks through the gRPC ring's float all-reduce. Each byte becomes one float 0..255: rank 0
// contributes the encoded id, every other rank zeros, and the sum reproduces it exactly
// (integers up to 2^24 are exact in float and x + 0 == x). Reinterpreting the bytes as
// floats would not survive a sum: -0.0 + 0.0 is +0.0 and NaN payloads are not preserved.
//
// Plain C++ (no CUDA), so it builds and is tested everywhere.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain {

// sizeof(ncclUniqueId) (NCCL_UNIQUE_ID_BYTES); nccl_allreduce.cc checks they agree.
inline constexpr int kNcclUniqueIdBytes = 128;

// One float per byte, in order.
std::vector<float> EncodeNcclUniqueId(absl::Span<const uint8_t> id);

// The inverse. Errors: INVALID_ARGUMENT when `encoded` is not kNcclUniqueIdBytes long or an
// entry is not an integer in 0..255 (the ranks' contributions did not add up to one id: more
// than one rank sent a non-zero id, or the ring mixed up two collectives).
absl::StatusOr<std::vector<uint8_t>> DecodeNcclUniqueId(absl::Span<const float> encoded);

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_NCCL_ID_CODEC_H_
