#include "ps_server/rpc/handoff_threads.h"

#include <atomic>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Tasks that wait for each other all run at once: none is queued behind a
// blocked one.
TEST(HandoffThreadsTest, BlockedTasksNeverHoldBackOthers) {
  constexpr int kTasks = 8;
  HandoffThreads pool;
  absl::BlockingCounter arrived(kTasks);
  absl::Notification all_arrived;
  std::atomic<int> done{0};
  for (int i = 0; i < kTasks; ++i) {
    pool.Run([&] {
      arrived.DecrementCount();
      all_arrived.WaitForNotification();
      ++done;
    });
  }
  arrived.Wait();  // would hang if a task waited for a thread held by another
  all_arrived.Notify();
  EXPECT_EQ(pool.threads(), kTasks);
  while (done.load() < kTasks) absl::SleepFor(absl::Milliseconds(1));
}

// One task at a time reuses the first thread rather than starting one per task.
TEST(HandoffThreadsTest, IdleThreadIsReused) {
  HandoffThreads pool;
  for (int i = 0; i < 20; ++i) {
    absl::Notification ran;
    pool.Run([&ran] { ran.Notify(); });
    ran.WaitForNotification();
    // The thread is idle again only once it waits for the next task.
    while (pool.idle_threads() < 1) absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(pool.threads(), 1);
}

// What was handed over runs even when the pool is destroyed right after.
TEST(HandoffThreadsTest, DestructionRunsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    HandoffThreads pool;
    for (int i = 0; i < 5; ++i) pool.Run([&ran] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 5);
}

}  // namespace
}  // namespace pstrain
