#include "common/wire_precision.h"

// The bfloat16 loops below are written branch-free so that they vectorize: they run over
// every element of every push and pull. GCC's -O2 cost model ("very cheap") vectorizes
// only loops whose trip count is a multiple of the vector width; the dynamic one adds the
// remainder loop. Clang vectorizes them at -O2 as they are.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pstrain's wire format is little-endian; big-endian hosts are not supported"
#endif

uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FloatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

constexpr uint32_t kInfinityBits = 0x7f800000;
// bfloat16's largest finite magnitude (0x7f7f), and IEEE half's (65504).
constexpr uint16_t kBfloat16MaxBits = 0x7f7f;
constexpr uint16_t kFloat16MaxBits = 0x7bff;
// 65520: the smallest magnitude that rounds to an infinity in half.
constexpr uint32_t kFloat16OverflowBits = 0x477ff000;
// 2^-14: the smallest normal half.
constexpr uint32_t kFloat16MinNormalBits = 0x38800000;

// FloatToBfloat16 on a float's bits, with selects instead of branches.
inline uint16_t Bfloat16Bits(uint32_t bits) {
  const uint32_t magnitude = bits & 0x7fffffffu;
  // Round to nearest, ties to even, on the 16 bits dropped.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  // A finite value rounded past the largest bfloat16 saturates, as float16 does.
  const uint32_t saturated = ((bits >> 16) & 0x8000u) | kBfloat16MaxBits;
  uint32_t out =
      (rounded & 0x7fffu) == 0x7f80u && magnitude != kInfinityBits ? saturated : rounded;
  // A NaN stays a (quiet) NaN whatever its payload's low bits.
  out = magnitude > kInfinityBits ? ((bits >> 16) | 0x0040u) : out;
  return static_cast<uint16_t>(out);
}

inline float RoundToBfloat16(float value) {
  return FloatOf(static_cast<uint32_t>(Bfloat16Bits(BitsOf(value))) << 16);
}

}  // namespace

absl::StatusOr<WirePrecision> ParseWirePrecision(absl::string_view name) {
  if (name == "float32" || name == "fp32") return WirePrecision::kFloat32;
  if (name == "bfloat16" || name == "bf16") return WirePrecision::kBfloat16;
  if (name == "float16" || name == "fp16") return WirePrecision::kFloat16;
  return absl::InvalidArgumentError(absl::StrCat(
      "wire_dtype \"", name.substr(0, 64), "\" is unknown (want float32, bfloat16 or float16)"));
}

absl::string_view WirePrecisionName(WirePrecision precision) {
  switch (precision) {
    case WirePrecision::kFloat32:
      return "float32";
    case WirePrecision::kBfloat16:
      return "bfloat16";
    case WirePrecision::kFloat16:
      return "float16";
  }
  return "float32";
}

DataType WireDataType(WirePrecision precision) {
  switch (precision) {
    case WirePrecision::kFloat32:
      return DT_FLOAT;
    case WirePrecision::kBfloat16:
      return DT_BFLOAT16;
    case WirePrecision::kFloat16:
      return DT_HALF;
  }
  return DT_FLOAT;
}

int WireBytesPerElement(WirePrecision precision) {
  return precision == WirePrecision::kFloat32 ? 4 : 2;
}

absl::StatusOr<WirePrecision> WirePrecisionOf(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT:
      return WirePrecision::kFloat32;
    case DT_BFLOAT16:
      return WirePrecision::kBfloat16;
    case DT_HALF:
      return WirePrecision::kFloat16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tensor dtype ", DataType_Name(dtype),
                       " is not supported (want DT_FLOAT, DT_BFLOAT16 or DT_HALF)"));
  }
}

uint16_t FloatToBfloat16(float value) { return Bfloat16Bits(BitsOf(value)); }

float Bfloat16ToFloat(uint16_t bits) { return FloatOf(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToFloat16(float value) {
  const uint32_t bits = BitsOf(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > kInfinityBits) return sign | 0x7e00;  // NaN
  if (magnitude == kInfinityBits) return sign | 0x7c00;
  if (magnitude >= kFloat16OverflowBits) return sign | kFloat16MaxBits;
  if (magnitude < kFloat16MinNormalBits) {
    // A subnormal half (or zero): m x 2^-24, m rounded to nearest even. The scaling by
    // 2^24 is exact, and nearbyint rounds ties to even in the default rounding mode.
    const float scaled = FloatOf(magnitude) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // A normal half: round the 13 dropped mantissa bits to nearest even (a carry moves into
  // the exponent, as it should), then rebias the exponent from 127 to 15.
  magnitude += 0x0fff + ((magnitude >> 13) & 1);
  magnitude -= uint32_t{127 - 15} << 23;
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

float Float16ToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return FloatOf(sign | kInfinityBits | (mantissa << 13));
  return FloatOf(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

float RoundForWire(WirePrecision precision, float value) {
  switch (precision) {
    case WirePrecision::kFloat32:
      return value;
    case WirePrecision::kBfloat16:
      return RoundToBfloat16(value);
    case WirePrecision::kFloat16:
      return Float16ToFloat(FloatToFloat16(value));
  }
  return value;
}

void RoundForWire(WirePrecision precision, absl::Span<float> values) {
  if (precision == WirePrecision::kFloat32) return;
  float* v = values.data();
  const size_t n = values.size();
  if (precision == WirePrecision::kBfloat16) {
    for (size_t i = 0; i < n; ++i) v[i] = RoundToBfloat16(v[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) v[i] = Float16ToFloat(FloatToFloat16(v[i]));
}

std::string EncodeForWire(WirePrecision precision, absl::Span<const float> values) {
  if (precision == WirePrecision::kFloat32) {
    return std::string(reinterpret_cast<const char*>(values.data()),
                       values.size() * sizeof(float));
  }
  const size_t n = values.size();
  std::string out(n * 2, '\0');
  char* dest = out.data();
  const float* src = values.data();
  // Little-endian, as float32's elements (the host's order: checked above).
  if (precision == WirePrecision::kBfloat16) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t bits = Bfloat16Bits(BitsOf(src[i]));
      std::memcpy(dest + 2 * i, &bits, 2);
    }
    return out;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint16_t bits = FloatToFloat16(src[i]);
    std::memcpy(dest + 2 * i, &bits, 2);
  }
  return out;
}

void DecodeFromWire(WirePrecision precision, absl::string_view bytes, absl::Span<float> out) {
  if (precision == WirePrecision::kFloat32) {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return;
  }
  const char* src = bytes.data();
  float* dest = out.data();
  const size_t n = out.size();
  if (precision == WirePrecision::kBfloat16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      dest[i] = FloatOf(static_cast<uint32_t>(bits) << 16);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    dest[i] = Float16ToFloat(bits);
  }
}

void TensorToWireProto(const Tensor& tensor, WirePrecision precision, TensorProto* proto) {
  if (precision == WirePrecision::kFloat32) {
    tensor.ToProto(proto);
    return;
  }
  proto->set_dtype(WireDataType(precision));
  proto->clear_shape();
  for (int64_t d : tensor.shape()) proto->add_shape(d);
  proto->set_content(EncodeForWire(precision, tensor.values()));
}

absl::StatusOr<Tensor> TensorFromWireProto(const TensorProto& proto) {
  absl::StatusOr<WirePrecision> precision = WirePrecisionOf(proto.dtype());
  if (!precision.ok()) return precision.status();
  if (*precision == WirePrecision::kFloat32) return Tensor::FromProto(proto);
  std::vector<int64_t> shape(proto.shape().begin(), proto.shape().end());
  absl::StatusOr<int64_t> count = CheckedNumElements(shape);
  if (!count.ok()) return count.status();
  const int64_t n = *count;
  // n <= kMaxTensorElements = INT64_MAX / 4: n x 2 cannot overflow.
  const int64_t want = n * WireBytesPerElement(*precision);
  if (static_cast<uint64_t>(proto.content().size()) != static_cast<uint64_t>(want)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor of shape ", ShapeToString(shape),
                                                   " in ", DataType_Name(proto.dtype()),
                                                   " needs ", want, " bytes of content, got ",
                                                   proto.content().size()));
  }
  Tensor tensor(std::move(shape));
  DecodeFromWire(*precision, proto.content(), tensor.values());
  return tensor;
}

void ErrorFeedback::Round(WirePrecision precision, size_t slot, absl::Span<float> values) {
  if (precision == WirePrecision::kFloat32) return;
  if (slot >= residuals_.size()) residuals_.resize(slot + 1);
  std::vector<float>& residual = residuals_[slot];
  if (residual.size() != values.size()) residual.assign(values.size(), 0.0f);
  float* v = values.data();
  float* r = residual.data();
  const size_t n = values.size();
  // A non-finite sum has nothing sensible to carry: the element goes as it is (a
  // non-finite gradient is the ps's to refuse) and the residual starts over.
  if (precision == WirePrecision::kBfloat16) {
    for (size_t i = 0; i < n; ++i) {  // branch-free (bit masks), to vectorize
      const float wanted = v[i] + r[i];
      const uint32_t finite =
          0u - static_cast<uint32_t>((BitsOf(wanted) & kInfinityBits) != kInfinityBits);
      const float sent =
          RoundToBfloat16(FloatOf((BitsOf(wanted) & finite) | (BitsOf(v[i]) & ~finite)));
      r[i] = FloatOf(BitsOf(wanted - sent) & finite);
      v[i] = sent;
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float wanted = v[i] + r[i];
    const bool finite = std::isfinite(wanted);
    const float sent = RoundForWire(precision, finite ? wanted : v[i]);
    r[i] = finite ? wanted - sent : 0.0f;
    v[i] = sent;
  }
}

absl::Span<const float> ErrorFeedback::residual(size_t slot) const {
  if (slot >= residuals_.size()) return {};
  return residuals_[slot];
}

}  // namespace pstrain
