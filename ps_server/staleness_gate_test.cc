#include "ps_server/staleness_gate.h"

#include <atomic>
#include <functional>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

PushContext At(const std::string& worker, int64_t step, int32_t epoch = 0) {
  PushContext context;
  context.worker = worker;
  context.epoch = epoch;
  context.step = step;
  return context;
}

bool WaitUntil(const std::function<bool()>& condition) {
  const absl::Time end = absl::Now() + absl::Minutes(1);
  while (!condition()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(StalenessGateTest, AWorkerTooFarAheadWaitsUntilTheSlowOneCatchesUp) {
  StalenessGate gate(2, absl::Minutes(1));
  gate.Wait(At("slow", 0));
  gate.Wait(At("fast", 2));  // 2 ahead: allowed
  EXPECT_EQ(gate.waits(), 0);
  std::atomic<bool> through{false};
  std::thread fast([&] {
    gate.Wait(At("fast", 3));  // 3 ahead: held
    through = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return gate.waits() == 1; }));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(through.load());
  gate.Wait(At("slow", 1));
  fast.join();
  EXPECT_TRUE(through.load());
  EXPECT_EQ(gate.timeouts(), 0);
  EXPECT_EQ(gate.max_lead(), 2);
}

TEST(StalenessGateTest, AnonymousPushesAndOtherEpochsHoldNobodyBack) {
  StalenessGate gate(0, absl::Minutes(1));
  gate.Wait(At("", 100));  // anonymous: neither held nor recorded
  gate.Wait(At("slow", 0));
  gate.Wait(At("slow", 0, /*epoch=*/1));  // done with epoch 0
  gate.Wait(At("fast", 50));              // epoch 0: nobody live in it but itself
  gate.Wait(At("", 0));
  EXPECT_EQ(gate.waits(), 0);
  EXPECT_EQ(gate.max_lead(), 0);
}

TEST(StalenessGateTest, ProceedsAtTheTimeoutAndCountsIt) {
  StalenessGate gate(1, absl::Milliseconds(100));
  gate.Wait(At("slow", 0));
  const absl::Time start = absl::Now();
  gate.Wait(At("fast", 5));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  EXPECT_EQ(gate.waits(), 1);
  EXPECT_EQ(gate.timeouts(), 1);
  EXPECT_EQ(gate.max_lead(), 5);  // the bound did not hold, and the status says so
}

// A worker silent for the timeout (killed, or done with its share) is not live: after
// one timeout it no longer holds anyone back at all.
TEST(StalenessGateTest, AWorkerSilentForTheTimeoutIsNotWaitedFor) {
  StalenessGate gate(0, absl::Milliseconds(200));
  gate.Wait(At("gone", 0));
  absl::SleepFor(absl::Milliseconds(250));
  gate.Wait(At("fast", 10));
  gate.Wait(At("fast", 11));
  EXPECT_EQ(gate.waits(), 0);
  EXPECT_EQ(gate.timeouts(), 0);
}

}  // namespace
}  // namespace pstrain
