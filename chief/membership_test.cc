#include "chief/membership.h"

#include <thread>

#include "absl/time/clock.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

ClusterSpec TwoPsTwoWorkers() {
  return *ClusterSpec::Create({{"chief", {"h:1"}},
                               {"ps", {"h:2", "h:3"}},
                               {"worker", {"h:4", "h:5"}}});
}

TEST(MembershipTest, WaitForAllNamesTheTasksThatNeverCame) {
  Membership membership(TwoPsTwoWorkers());
  ASSERT_TRUE(membership.Register("ps", 0, "h:2", 7).ok());
  ASSERT_TRUE(membership.Register("worker", 0, "h:4", 8).ok());
  absl::Status status = membership.WaitForAll(absl::Milliseconds(200), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("ps 1 (h:3)"), std::string::npos) << status;
  EXPECT_NE(status.message().find("worker 1 (h:5)"), std::string::npos) << status;
  EXPECT_EQ(status.message().find("ps 0"), std::string::npos) << status;
}

TEST(MembershipTest, WaitForAllReturnsWhenTheLastTaskRegisters) {
  Membership membership(TwoPsTwoWorkers());
  std::thread late([&] {
    for (auto [type, index] : std::vector<std::pair<std::string, int>>{
             {"ps", 0}, {"ps", 1}, {"worker", 0}, {"worker", 1}}) {
      ASSERT_TRUE(membership.Register(type, index, "", 1).ok());
    }
  });
  EXPECT_TRUE(membership.WaitForAll(absl::Seconds(30), nullptr).ok());
  late.join();
}

TEST(MembershipTest, UnknownTaskAndStaleIncarnationAreRejected) {
  Membership membership(TwoPsTwoWorkers());
  EXPECT_EQ(membership.Register("worker", 2, "h:9", 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(membership.Register("evaluator", 0, "h:9", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(membership.Heartbeat("worker", 0, 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(membership.CheckKnown("worker", 7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(membership.CheckKnown("ps", 1).ok());
  ASSERT_TRUE(membership.Register("worker", 0, "h:4", 1).ok());
  ASSERT_TRUE(membership.Register("worker", 0, "h:4", 2).ok());  // restarted
  EXPECT_EQ(membership.Heartbeat("worker", 0, 1).status().code(), absl::StatusCode::kNotFound);
  auto over = membership.Heartbeat("worker", 0, 2);
  ASSERT_TRUE(over.ok());
  EXPECT_FALSE(*over);
  membership.EndJob();
  EXPECT_TRUE(*membership.Heartbeat("worker", 0, 2));
}

TEST(MembershipTest, IsLiveNeedsARegistrationAndAFreshHeartbeat) {
  Membership membership(TwoPsTwoWorkers());
  EXPECT_FALSE(membership.IsLive("worker", 1, absl::Seconds(5)));
  ASSERT_TRUE(membership.Register("worker", 1, "h:5", 3).ok());
  EXPECT_TRUE(membership.IsLive("worker", 1, absl::Seconds(5)));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(membership.IsLive("worker", 1, absl::Milliseconds(10)));
  ASSERT_TRUE(membership.Heartbeat("worker", 1, 3).ok());
  EXPECT_TRUE(membership.IsLive("worker", 1, absl::Seconds(5)));
  EXPECT_FALSE(membership.IsLive("worker", 7, absl::Seconds(5)));
}

}  // namespace
}  // namespace pstrain
