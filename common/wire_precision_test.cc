#include "common/wire_precision.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(WirePrecisionTest, ParsesNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseWirePrecision("bfloat16"), WirePrecision::kBfloat16);
  EXPECT_EQ(*ParseWirePrecision("bf16"), WirePrecision::kBfloat16);
  EXPECT_EQ(*ParseWirePrecision("float16"), WirePrecision::kFloat16);
  EXPECT_EQ(*ParseWirePrecision("float32"), WirePrecision::kFloat32);
  absl::StatusOr<WirePrecision> bad = ParseWirePrecision("int8");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("want float32, bfloat16 or float16"), std::string::npos);
}

TEST(WirePrecisionTest, Bfloat16KnownBitsAndTiesToEven) {
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBfloat16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (bfloat16 keeps 7 fraction bits): to even.
  EXPECT_EQ(FloatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 x 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(FloatToBfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above halfway rounds up.
  EXPECT_EQ(FloatToBfloat16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
  EXPECT_EQ(Bfloat16ToFloat(0x3f81), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::nanf("")))));
  EXPECT_EQ(Bfloat16ToFloat(FloatToBfloat16(-INFINITY)), -INFINITY);
  // The largest float saturates to the largest bfloat16 instead of becoming infinite.
  EXPECT_EQ(FloatToBfloat16(std::numeric_limits<float>::max()), 0x7f7f);
}

TEST(WirePrecisionTest, Float16KnownBitsSubnormalsAndSaturation) {
  EXPECT_EQ(FloatToFloat16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFloat16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFloat16(1e6f), 0x7bff);    // saturates
  EXPECT_EQ(FloatToFloat16(-1e6f), 0xfbff);
  EXPECT_EQ(FloatToFloat16(INFINITY), 0x7c00);
  EXPECT_TRUE(std::isnan(Float16ToFloat(FloatToFloat16(std::nanf("")))));
  EXPECT_EQ(FloatToFloat16(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to 0: to even
  EXPECT_EQ(FloatToFloat16(std::ldexp(3.0f, -25)), 0x0002);  // halfway 1..2: to even
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even.
  EXPECT_EQ(FloatToFloat16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToFloat16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Every half decodes and encodes back to itself (NaNs aside).
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = Float16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToFloat16(f), bits) << bits;
  }
}

TEST(WirePrecisionTest, TensorProtoRoundTripAndRefusals) {
  Tensor t({2, 2}, {1.0f, -0.5f, 3.140625f, 1e-3f});
  TensorProto proto;
  TensorToWireProto(t, WirePrecision::kBfloat16, &proto);
  EXPECT_EQ(proto.dtype(), DT_BFLOAT16);
  EXPECT_EQ(proto.content().size(), 8u);
  absl::StatusOr<Tensor> back = TensorFromWireProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape(), t.shape());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(back->values()[i], RoundForWire(WirePrecision::kBfloat16, t.values()[i]));
  }
  // Content of the wrong length for the shape and dtype.
  proto.mutable_content()->pop_back();
  absl::StatusOr<Tensor> short_content = TensorFromWireProto(proto);
  ASSERT_FALSE(short_content.ok());
  EXPECT_NE(short_content.status().message().find("DT_BFLOAT16 needs 8 bytes"), std::string::npos)
      << short_content.status();
  // float16 too, and float32 unchanged.
  TensorToWireProto(t, WirePrecision::kFloat16, &proto);
  EXPECT_EQ(proto.dtype(), DT_HALF);
  EXPECT_EQ(TensorFromWireProto(proto)->values()[2], 3.140625f);
  TensorToWireProto(t, WirePrecision::kFloat32, &proto);
  EXPECT_EQ(TensorFromWireProto(proto)->values()[3], 1e-3f);
  // A dtype that is not a float.
  proto.set_dtype(DT_INT32);
  EXPECT_FALSE(TensorFromWireProto(proto).ok());
  // A shape whose element count overflows.
  proto.set_dtype(DT_HALF);
  proto.clear_shape();
  proto.add_shape(int64_t{1} << 40);
  proto.add_shape(int64_t{1} << 40);
  EXPECT_FALSE(TensorFromWireProto(proto).ok());
}

// Error feedback: what one push rounds away goes out with the next, so the sum of what
// was sent follows the sum of the gradients within one rounding.
TEST(WirePrecisionTest, ErrorFeedbackCarriesTheRoundingError) {
  ErrorFeedback feedback;
  const float gradient = 1.0f + std::ldexp(1.0f, -9);  // bfloat16 carries 1 (step 2^-7)
  std::vector<float> g = {gradient};
  feedback.Round(WirePrecision::kBfloat16, 0, absl::MakeSpan(g));
  EXPECT_EQ(g[0], 1.0f);
  ASSERT_EQ(feedback.residual(0).size(), 1u);
  EXPECT_EQ(feedback.residual(0)[0], std::ldexp(1.0f, -9));
  // Without feedback 100 pushes would send 100 x 1.0 and lose 100 x 2^-9; with it the
  // total sent is within one bfloat16 step of the total pushed.
  double sent = g[0];
  for (int step = 1; step < 100; ++step) {
    g = {gradient};
    feedback.Round(WirePrecision::kBfloat16, 0, absl::MakeSpan(g));
    EXPECT_EQ(FloatToBfloat16(g[0]) != 0, true);
    EXPECT_EQ(RoundForWire(WirePrecision::kBfloat16, g[0]), g[0]);  // exactly representable
    sent += g[0];
  }
  const double pushed = 100.0 * gradient;
  EXPECT_LE(std::abs(sent - pushed), std::ldexp(1.0, -7)) << sent << " vs " << pushed;
  EXPECT_GT(sent, 100.0);  // some pushes went out as 1 + 2^-7
  // Slots are independent; float32 leaves values and residuals alone.
  std::vector<float> other = {0.1f};
  feedback.Round(WirePrecision::kFloat32, 1, absl::MakeSpan(other));
  EXPECT_EQ(other[0], 0.1f);
  EXPECT_TRUE(feedback.residual(1).empty());
  // A non-finite gradient goes as it is, and its residual starts over.
  std::vector<float> bad = {NAN};
  feedback.Round(WirePrecision::kBfloat16, 0, absl::MakeSpan(bad));
  EXPECT_TRUE(std::isnan(bad[0]));
  EXPECT_EQ(feedback.residual(0)[0], 0.0f);
}

}  // namespace
}  // namespace pstrain
