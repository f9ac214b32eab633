#include "ps_server/request_log.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

using Claim = RequestLog::Claim;

TEST(RequestLogTest, AnAppliedIdIsADuplicateAFailedOneMayBeRetried) {
  RequestLog log;
  ASSERT_EQ(log.Begin(7, absl::ZeroDuration()), Claim::kApply);
  log.Finish(7, /*applied=*/true);
  EXPECT_EQ(log.Begin(7, absl::ZeroDuration()), Claim::kDuplicate);

  ASSERT_EQ(log.Begin(8, absl::ZeroDuration()), Claim::kApply);
  log.Finish(8, /*applied=*/false);
  EXPECT_EQ(log.Begin(8, absl::ZeroDuration()), Claim::kApply);
}

TEST(RequestLogTest, ForgetsTheOldestBeyondCapacity) {
  RequestLog log(/*capacity=*/3);
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_EQ(log.Begin(id, absl::ZeroDuration()), Claim::kApply);
    log.Finish(id, true);
  }
  EXPECT_EQ(log.Begin(1, absl::ZeroDuration()), Claim::kApply);  // forgotten
  for (uint64_t id = 3; id <= 4; ++id) {
    EXPECT_EQ(log.Begin(id, absl::ZeroDuration()), Claim::kDuplicate) << id;
  }
}

TEST(RequestLogTest, AConcurrentRetryWaitsForTheFirstAndIsNotAppliedTwice) {
  RequestLog log;
  ASSERT_EQ(log.Begin(5, absl::ZeroDuration()), Claim::kApply);
  EXPECT_EQ(log.Begin(5, absl::Milliseconds(10)), Claim::kBusy);
  std::atomic<int> applied{0};
  std::vector<std::thread> retries;
  for (int i = 0; i < 4; ++i) {
    retries.emplace_back([&] {
      Claim c = log.Begin(5, absl::Seconds(30));
      if (c == Claim::kApply) {
        ++applied;
        log.Finish(5, true);
      }
    });
  }
  log.Finish(5, true);  // the first call applied it
  for (std::thread& t : retries) t.join();
  EXPECT_EQ(applied.load(), 0);
}

}  // namespace
}  // namespace pstrain
