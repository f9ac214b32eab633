// PreemptionWatcher with real signals sent to this process.

#include "pstrain/preemption.h"

#include <signal.h>

#include "gtest/gtest.h"

namespace pstrain::distribute {
namespace {

TEST(PreemptionWatcherTest, TheFirstSignalIsRecordedAndTheSecondEndsTheProcess) {
  PreemptionWatcher::Watch();
  PreemptionWatcher::Watch();  // a second call changes nothing
  EXPECT_EQ(PreemptionWatcher::Preempted(), nullptr);
  // Delivered to this thread before raise returns; the process goes on.
  ASSERT_EQ(::raise(SIGTERM), 0);
  ASSERT_NE(PreemptionWatcher::Preempted(), nullptr);
  EXPECT_STREQ(PreemptionWatcher::Preempted(), "SIGTERM");
  // A later SIGINT does not replace the first signal; it ends the process as its default
  // does (checked in a child, which inherits the recorded signal).
  EXPECT_EXIT(::raise(SIGINT), ::testing::KilledBySignal(SIGINT), "");
  EXPECT_STREQ(PreemptionWatcher::Preempted(), "SIGTERM");
}

}  // namespace
}  // namespace pstrain::distribute
