#include "common/finite.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

constexpr uint32_t kExponentMask = 0x7f800000u;
// Elements tested per block before the block's result is looked at.
constexpr size_t kBlock = 256;

// True when some value in [begin, end) has an all-ones exponent (NaN or infinity).
bool BlockHasNonFinite(const float* begin, size_t n) {
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, begin + i, sizeof(bits));
    any |= static_cast<uint32_t>((bits & kExponentMask) == kExponentMask);
  }
  return any != 0;
}

}  // namespace

int64_t FirstNonFinite(absl::Span<const float> values) {
  const float* data = values.data();
  const size_t n = values.size();
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t count = n - start < kBlock ? n - start : kBlock;
    if (!BlockHasNonFinite(data + start, count)) continue;
    for (size_t i = start; i < start + count; ++i) {
      if (!std::isfinite(data[i])) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

std::string DescribeFloat(float value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return absl::StrCat(value);
}

absl::Status CheckFinite(absl::Span<const float> values, absl::string_view what) {
  const int64_t bad = FirstNonFinite(values);
  if (bad < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " holds a non-finite value (",
                                                 DescribeFloat(values[bad]), ") at element ",
                                                 bad, " of ", values.size()));
}

}  // namespace pstrain
