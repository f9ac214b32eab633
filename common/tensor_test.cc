#include "common/tensor.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(TensorTest, ProtoRoundTripKeepsShapeAndValues) {
  Tensor t({2, 3}, {1, 2, 3, 4, 5, 6});
  absl::StatusOr<Tensor> back = Tensor::FromProto(t.ToProto());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::vector<float>(back->values().begin(), back->values().end()),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(TensorTest, ContentLengthMismatchIsInvalidArgument) {
  TensorProto proto = Tensor({2, 2}, {1, 2, 3, 4}).ToProto();
  proto.set_content(proto.content().substr(0, 12));
  absl::StatusOr<Tensor> back = Tensor::FromProto(proto);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(back.status().message().find("needs 16 bytes"), std::string::npos);
}

TEST(TensorTest, NegativeDimensionAndWrongDtypeAreRejected) {
  TensorProto proto;
  proto.set_dtype(DT_FLOAT);
  proto.add_shape(-1);
  EXPECT_EQ(Tensor::FromProto(proto).status().code(), absl::StatusCode::kInvalidArgument);
  proto.clear_shape();
  proto.set_dtype(DT_INT64);
  EXPECT_EQ(Tensor::FromProto(proto).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, OverflowingShapeIsRejected) {
  TensorProto proto;
  proto.set_dtype(DT_FLOAT);
  proto.add_shape(int64_t{1} << 40);
  proto.add_shape(int64_t{1} << 40);
  EXPECT_EQ(Tensor::FromProto(proto).status().code(), absl::StatusCode::kInvalidArgument);
}

// 2^62 elements are 2^64 bytes: the byte count wraps to 0, which an empty content
// matched, and allocating the values threw (gRPC answered UNKNOWN).
TEST(TensorTest, ShapeWhoseByteCountWrapsIsInvalidArgument) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{int64_t{1} << 62},
                                     std::vector<int64_t>{int64_t{1} << 31, int64_t{1} << 31},
                                     std::vector<int64_t>{kMaxTensorElements + 1}}) {
    TensorProto proto;
    proto.set_dtype(DT_FLOAT);
    for (int64_t d : shape) proto.add_shape(d);
    absl::StatusOr<Tensor> t = Tensor::FromProto(proto);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << ShapeToString(shape);
    EXPECT_NE(t.status().message().find(ShapeToString(shape)), std::string::npos);
  }
}

}  // namespace
}  // namespace pstrain
