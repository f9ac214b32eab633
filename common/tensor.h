#ifndef PSTRAIN_COMMON_TENSOR_H_
#define PSTRAIN_COMMON_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/tensor.pb.h"

namespace pstrain {

// A dense float32 tensor in host memory, row-major. Value type: copies copy the data.
// Not thread-safe; callers that share one guard it themselves.
class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of `shape`. Every dimension must be >= 0.
  explicit Tensor(std::vector<int64_t> shape);
  Tensor(std::vector<int64_t> shape, std::vector<float> values);

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const { return static_cast<int64_t>(values_.size()); }
  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  absl::Span<float> values() { return absl::MakeSpan(values_); }
  absl::Span<const float> values() const { return values_; }

  // "[784,64]".
  std::string ShapeString() const;

  // Serializes as DT_FLOAT with little-endian bytes.
  TensorProto ToProto() const;
  void ToProto(TensorProto* proto) const;

  // Errors: INVALID_ARGUMENT when the dtype is not DT_FLOAT, a dimension is negative,
  // the element count overflows or exceeds kMaxTensorElements, or the byte length does
  // not match the shape.
  static absl::StatusOr<Tensor> FromProto(const TensorProto& proto);

 private:
  std::vector<int64_t> shape_;
  std::vector<float> values_;
};

// A tensor with the variable name it belongs to (a value or a gradient).
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Most elements a tensor may hold: its byte count (4 per element) must fit an int64, so
// no size computed from a shape can overflow.
inline constexpr int64_t kMaxTensorElements = INT64_MAX / 4;

// Product of the dimensions; -1 when a dimension is negative or the product overflows.
int64_t NumElements(absl::Span<const int64_t> shape);

// NumElements of a shape that came from outside (a message, a file).
// Errors: INVALID_ARGUMENT a negative dimension, an overflowing count, or more than
// kMaxTensorElements, the shape named.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape);

std::string ShapeToString(absl::Span<const int64_t> shape);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TENSOR_H_
