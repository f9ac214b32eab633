#include "common/rpc/replay_cache.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);
const int64_t kNowMicros = absl::ToUnixMicros(kNow);

TEST(ReplayCacheTest, RefusesANonceSeenBefore) {
  ReplayCache cache;
  EXPECT_TRUE(cache.Admit(kNowMicros, "a", kNow).ok());
  EXPECT_TRUE(cache.Admit(kNowMicros, "b", kNow).ok());
  const absl::Status replay = cache.Admit(kNowMicros, "a", kNow + absl::Seconds(1));
  EXPECT_EQ(replay.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(replay.message().find("replayed"), absl::string_view::npos) << replay;
  EXPECT_EQ(cache.size(), 2u);
}

TEST(ReplayCacheTest, RefusesATimeOutsideTheWindow) {
  ReplayCache cache(absl::Seconds(60));
  EXPECT_EQ(cache.Admit(kNowMicros - 61'000'000, "a", kNow).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(cache.Admit(kNowMicros + 61'000'000, "b", kNow).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(cache.Admit(kNowMicros - 59'000'000, "c", kNow).ok());
  EXPECT_TRUE(cache.Admit(kNowMicros + 59'000'000, "d", kNow).ok());
  // Once "c" left the window it is forgotten, and refused by its time alone.
  EXPECT_EQ(cache.Admit(kNowMicros - 59'000'000, "c", kNow + absl::Seconds(2)).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(cache.Admit(kNowMicros + 2'000'000, "e", kNow + absl::Seconds(2)).ok());
  EXPECT_EQ(cache.size(), 2u);  // "d" and "e"
}

TEST(ReplayCacheTest, BoundedAndStillRefusesEveryReplay) {
  ReplayCache cache(absl::Seconds(60), /*capacity=*/100);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(cache.Admit(kNowMicros + i, absl::StrCat("n", i), kNow).ok()) << i;
    EXPECT_LE(cache.size(), 100u);
  }
  // Dropped or held, every admitted call is refused again.
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(cache.Admit(kNowMicros + i, absl::StrCat("n", i), kNow).code(),
              absl::StatusCode::kUnauthenticated)
        << i;
  }
  // New calls at the present still pass.
  EXPECT_TRUE(cache.Admit(kNowMicros + 5000, "fresh", kNow).ok());
}

}  // namespace
}  // namespace pstrain
