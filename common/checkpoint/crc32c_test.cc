#include "common/checkpoint/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(Crc32cTest, StandardCheckValue) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, and of 0xFF.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  for (size_t split = 0; split <= text.size(); ++split) {
    EXPECT_EQ(Crc32cExtend(Crc32c(text.data(), split), text.data() + split, text.size() - split),
              Crc32c(text))
        << split;
  }
}

}  // namespace
}  // namespace pstrain
