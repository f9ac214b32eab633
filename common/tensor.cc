#include "common/tensor.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {

static_assert(sizeof(float) == 4, "float must be IEEE-754 binary32");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pstrain's wire format is little-endian; big-endian hosts are not supported"
#endif

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> shape) {
  const int64_t n = NumElements(shape);
  if (n < 0 || n > kMaxTensorElements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor shape ", ShapeToString(shape),
        n < 0 ? " is invalid (a negative dimension, or its element count overflows)"
              : " holds more elements than any tensor may"));
  }
  return n;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

Tensor::Tensor(std::vector<int64_t> shape)
    : shape_(std::move(shape)), values_(NumElements(shape_) > 0 ? NumElements(shape_) : 0) {}

Tensor::Tensor(std::vector<int64_t> shape, std::vector<float> values)
    : shape_(std::move(shape)), values_(std::move(values)) {}

std::string Tensor::ShapeString() const { return ShapeToString(shape_); }

TensorProto Tensor::ToProto() const {
  TensorProto proto;
  ToProto(&proto);
  return proto;
}

void Tensor::ToProto(TensorProto* proto) const {
  proto->set_dtype(DT_FLOAT);
  proto->clear_shape();
  for (int64_t d : shape_) proto->add_shape(d);
  proto->set_content(reinterpret_cast<const char*>(values_.data()),
                     values_.size() * sizeof(float));
}

absl::StatusOr<Tensor> Tensor::FromProto(const TensorProto& proto) {
  if (proto.dtype() != DT_FLOAT) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor dtype ", DataType_Name(proto.dtype()), " is not supported (want DT_FLOAT)"));
  }
  std::vector<int64_t> shape(proto.shape().begin(), proto.shape().end());
  absl::StatusOr<int64_t> count = CheckedNumElements(shape);
  if (!count.ok()) return count.status();
  const int64_t n = *count;
  if (static_cast<uint64_t>(proto.content().size()) != static_cast<uint64_t>(n) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor of shape ", ShapeToString(shape), " needs ", n * sizeof(float),
        " bytes of content, got ", proto.content().size()));
  }
  std::vector<float> values(n);
  if (n > 0) std::memcpy(values.data(), proto.content().data(), n * sizeof(float));
  return Tensor(std::move(shape), std::move(values));
}

}  // namespace pstrain
