#include "ps_server/rpc/stream_limiter.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(StreamLimiterTest, APeerIsItsHostWhateverThePort) {
  EXPECT_EQ(StreamLimiter::PeerHost("ipv4:127.0.0.1:5123"), "ipv4:127.0.0.1");
  EXPECT_EQ(StreamLimiter::PeerHost("ipv6:[::1]:5123"), "ipv6:[::1]");
  EXPECT_EQ(StreamLimiter::PeerHost("ipv6:%5B::1%5D:5123"), "ipv6:%5B::1%5D");
  EXPECT_EQ(StreamLimiter::PeerHost("unix:/tmp/socket"), "unix:/tmp/socket");
  EXPECT_EQ(StreamLimiter::PeerHost("ipv6:[::1]"), "ipv6:[::1]");
}

}  // namespace
}  // namespace pstrain
