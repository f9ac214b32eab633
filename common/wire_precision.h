#ifndef PSTRAIN_COMMON_WIRE_PRECISION_H_
#define PSTRAIN_COMMON_WIRE_PRECISION_H_

// Tensors on the wire in 16 bits (a job's "wire_dtype"): the workers' pushes and the ps's
// answers to them carry bfloat16 or IEEE half instead of float32, half the bytes, while
// the ps keeps and updates float32 values. What a push loses to rounding is not lost:
// ErrorFeedback carries each element's rounding error into the next push of the same
// variable (error-feedback compression, as in 1-bit SGD and EF-SGD), so the sum of what a
// worker pushed over n steps differs from the sum of its gradients by one rounding, not n.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "proto/tensor.pb.h"

namespace pstrain {

enum class WirePrecision {
  kFloat32,   // DT_FLOAT: exact (the default)
  kBfloat16,  // DT_BFLOAT16: float32's range, 8 significant bits
  kFloat16,   // DT_HALF: IEEE binary16, 11 significant bits, finite values up to 65504
};

// "float32", "bfloat16" or "float16" (also "fp32", "bf16", "fp16").
// Errors: INVALID_ARGUMENT anything else, the accepted names listed.
absl::StatusOr<WirePrecision> ParseWirePrecision(absl::string_view name);
absl::string_view WirePrecisionName(WirePrecision precision);
DataType WireDataType(WirePrecision precision);
int WireBytesPerElement(WirePrecision precision);

// Round to nearest, ties to even; NaN stays NaN, infinities stay infinite. To float16, a
// finite value beyond 65504 saturates to +-65504 (a gradient that large is clipped on the
// wire rather than turned into an infinity the ps would refuse; ErrorFeedback carries
// the difference).
uint16_t FloatToBfloat16(float value);
float Bfloat16ToFloat(uint16_t bits);
uint16_t FloatToFloat16(float value);
float Float16ToFloat(uint16_t bits);

// The float `value` becomes after a trip over the wire in `precision`.
float RoundForWire(WirePrecision precision, float value);
void RoundForWire(WirePrecision precision, absl::Span<float> values);

// The elements as `precision` carries them, little-endian, WireBytesPerElement each.
std::string EncodeForWire(WirePrecision precision, absl::Span<const float> values);

// `tensor` as a TensorProto of WireDataType(precision).
void TensorToWireProto(const Tensor& tensor, WirePrecision precision, TensorProto* proto);

// A TensorProto of DT_FLOAT, DT_BFLOAT16 or DT_HALF as a float32 tensor.
// Errors: INVALID_ARGUMENT another dtype, or what Tensor::FromProto refuses (a bad shape,
// content of the wrong length for the shape and dtype).
absl::StatusOr<Tensor> TensorFromWireProto(const TensorProto& proto);

// The precision a DataType names on the wire. Errors: INVALID_ARGUMENT another dtype.
absl::StatusOr<WirePrecision> WirePrecisionOf(DataType dtype);

// Widens `bytes` (a whole number of elements of `precision`) into `out`, which holds
// exactly bytes.size() / WireBytesPerElement(precision) floats.
void DecodeFromWire(WirePrecision precision, absl::string_view bytes, absl::Span<float> out);

// The rounding error of each element of every variable a worker pushes, carried into its
// next push: Round(slot, g) pushes round(g + residual) and keeps
// residual = g + residual - round(g + residual). One slot per pushed tensor (a worker
// pushes the same tensors each step); a slot's size follows its tensor's. Thread-
// compatible: concurrent calls must use distinct instances.
class ErrorFeedback {
 public:
  // Rounds `values` in place for `precision` (a no-op for kFloat32), after adding the
  // slot's residual, and stores the new residual. A non-finite element is left as it is
  // (the ps refuses it) and its residual reset to 0.
  void Round(WirePrecision precision, size_t slot, absl::Span<float> values);

  // The residual of `slot` (empty before its first Round).
  absl::Span<const float> residual(size_t slot) const;

 private:
  std::vector<std::vector<float>> residuals_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_WIRE_PRECISION_H_
