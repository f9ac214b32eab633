#ifndef PSTRAIN_COMMON_CHECKPOINT_CRC32C_H_
#define PSTRAIN_COMMON_CHECKPOINT_CRC32C_H_

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum checkpoints store per
// tensor. Debian's Abseil 20220623 has no absl::crc32c, so this is a small table-driven
// implementation; "123456789" -> 0xE3069283. Pure functions: safe from any thread.

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace pstrain {

// Extends `crc` (the value returned for the bytes before) with `size` more bytes; start
// with 0. Crc32cExtend(Crc32cExtend(0, a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }
inline uint32_t Crc32c(absl::string_view bytes) { return Crc32c(bytes.data(), bytes.size()); }

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_CRC32C_H_
