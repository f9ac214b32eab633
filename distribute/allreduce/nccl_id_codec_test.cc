#include "distribute/allreduce/nccl_id_codec.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<uint8_t> AllByteValues() {
  std::vector<uint8_t> id(kNcclUniqueIdBytes);
  for (int i = 0; i < kNcclUniqueIdBytes; ++i) id[i] = static_cast<uint8_t>(255 - 2 * i);
  id[0] = 0;
  id[1] = 255;
  id[2] = 0x80;  // would be the sign byte of a float read from the bytes
  return id;
}

TEST(NcclIdCodecTest, RoundTrip) {
  const std::vector<uint8_t> id = AllByteValues();
  const std::vector<float> encoded = EncodeNcclUniqueId(id);
  ASSERT_EQ(encoded.size(), id.size());
  for (float v : encoded) {
    EXPECT_FALSE(std::signbit(v));
    EXPECT_LE(v, 255.0f);
  }
  absl::StatusOr<std::vector<uint8_t>> decoded = DecodeNcclUniqueId(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, id);
}

// What the ring does: rank 0 sends the id, the other ranks zeros, in any summation order.
TEST(NcclIdCodecTest, SurvivesASumWithZeros) {
  const std::vector<uint8_t> id = AllByteValues();
  std::vector<float> sum(kNcclUniqueIdBytes, 0.0f);
  for (int rank = 3; rank >= 0; --rank) {
    const std::vector<float> mine =
        rank == 0 ? EncodeNcclUniqueId(id) : std::vector<float>(kNcclUniqueIdBytes, -0.0f);
    for (int i = 0; i < kNcclUniqueIdBytes; ++i) sum[i] += mine[i];
  }
  absl::StatusOr<std::vector<uint8_t>> decoded = DecodeNcclUniqueId(sum);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, id);
}

TEST(NcclIdCodecTest, RejectsWhatIsNotAnId) {
  std::vector<float> encoded = EncodeNcclUniqueId(AllByteValues());
  EXPECT_EQ(DecodeNcclUniqueId(absl::MakeSpan(encoded).subspan(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (float bad : {256.0f, -1.0f, 1.5f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    std::vector<float> copy = encoded;
    copy[7] = bad;
    const absl::Status st = DecodeNcclUniqueId(copy).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("byte 7"), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace pstrain
