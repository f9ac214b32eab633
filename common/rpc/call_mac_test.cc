#include "common/rpc/call_mac.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

constexpr char kSecret[] = "job-secret-0123456789abcdef";

TEST(CallMacTest, MatchesHmacSha256OfTheLabelledFields) {
  // From Python's hmac.new(b"job-secret-0123456789abcdef",
  // b"pstrain-call-v1\0/pstrain.Ps/Push\0worker-1\x00123\0n\0", hashlib.sha256): the MAC
  // is the standard HMAC, so another implementation can check it.
  EXPECT_EQ(CallMac(kSecret, "/pstrain.Ps/Push", "worker-1", 123, "n"),
            "1d112b402fcbf635ff4da9c3706bdbbe4cb58c5f96863b5c91f10e381f17ce87");
}

TEST(CallMacTest, MatchesHmacSha256ForSecretsOfABlockAndLonger) {
  // Python's hmac.new(secret, b"pstrain-reply-v1\0/pstrain.Ps/Push\0nonce\0",
  // hashlib.sha256): a secret of exactly SHA-256's 64-byte block is used as it is, a
  // longer one (tokens may have up to 4096 characters) is hashed first.
  EXPECT_EQ(ReplyProof(std::string(64, 'k'), "/pstrain.Ps/Push", "nonce"),
            "f57583e30385b99137959b9d31454aee63d184f1e98310a27d94294e21910869");
  std::string long_secret;
  for (int i = 0; i < 5; ++i) long_secret += "0123456789abcdef";
  EXPECT_EQ(ReplyProof(long_secret, "/pstrain.Ps/Push", "nonce"),
            "9d8ba1f8d2947619896892a39b7e86b70b4fde9901ad38dbc3304a85abc02e40");
  // The thread's keyed state follows the secret it is given.
  EXPECT_EQ(CallMac(kSecret, "/pstrain.Ps/Push", "worker-1", 123, "n"),
            "1d112b402fcbf635ff4da9c3706bdbbe4cb58c5f96863b5c91f10e381f17ce87");
}

TEST(CallMacTest, EveryFieldChangesTheMac) {
  const std::string mac = CallMac(kSecret, "/pstrain.Ps/Push", "worker-1", 123, "nonce");
  EXPECT_EQ(mac.size(), 64u);
  EXPECT_EQ(mac, CallMac(kSecret, "/pstrain.Ps/Push", "worker-1", 123, "nonce"));
  EXPECT_NE(mac, CallMac("job-secret-0123456789abcdeF", "/pstrain.Ps/Push", "worker-1", 123,
                         "nonce"));
  EXPECT_NE(mac, CallMac(kSecret, "/pstrain.Ps/Pull", "worker-1", 123, "nonce"));
  EXPECT_NE(mac, CallMac(kSecret, "/pstrain.Ps/Push", "worker-2", 123, "nonce"));
  EXPECT_NE(mac, CallMac(kSecret, "/pstrain.Ps/Push", "worker-1", 124, "nonce"));
  EXPECT_NE(mac, CallMac(kSecret, "/pstrain.Ps/Push", "worker-1", 123, "noncf"));
  // Fields are delimited: moving a character from one to the next changes the MAC.
  EXPECT_NE(CallMac(kSecret, "/a", "worker-1", 1, "x"), CallMac(kSecret, "/a", "worker-", 11, "x"));
}

TEST(CallMacTest, AReplyProofIsNeverACallMac) {
  const std::string proof = ReplyProof(kSecret, "/pstrain.Ps/Push", "nonce");
  EXPECT_EQ(proof.size(), 64u);
  EXPECT_NE(proof, ReplyProof(kSecret, "/pstrain.Ps/Push", "noncf"));
  EXPECT_NE(proof, ReplyProof(kSecret, "/pstrain.Ps/Pull", "nonce"));
  EXPECT_NE(proof, ReplyProof("job-secret-0123456789abcdeF", "/pstrain.Ps/Push", "nonce"));
  EXPECT_NE(proof, CallMac(kSecret, "/pstrain.Ps/Push", "", 0, "nonce"));
}

TEST(CallMacTest, NoncesAreRandomHex) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string nonce = NewCallNonce();
    ASSERT_EQ(nonce.size(), 32u);
    EXPECT_EQ(nonce.find_first_not_of("0123456789abcdef"), std::string::npos) << nonce;
    seen.insert(nonce);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace pstrain
