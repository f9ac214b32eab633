#include "ps_server/client/exchange_threads.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Every lane's task of a round runs at once: each waits until all have arrived, which
// would hang if one lane's task were queued behind another's.
TEST(ExchangeThreadsTest, LanesRunAtOnceOnTheSameThreadsEveryRound) {
  constexpr int kLanes = 3;
  ExchangeThreads threads(kLanes);
  EXPECT_EQ(threads.lanes(), kLanes);
  std::vector<std::thread::id> first_round(kLanes);
  for (int round = 0; round < 5; ++round) {
    absl::Mutex mu;
    int arrived = 0;
    std::vector<std::thread::id> ids(kLanes);
    std::vector<ExchangeThreads::Task> tasks;
    for (int i = 0; i < kLanes; ++i) {
      tasks.push_back([&, i] {
        ids[i] = std::this_thread::get_id();
        absl::MutexLock lock(&mu);
        ++arrived;
        auto all_arrived = [&arrived] { return arrived == kLanes; };
        mu.Await(absl::Condition(&all_arrived));
        return absl::OkStatus();
      });
    }
    ASSERT_TRUE(threads.Start(std::move(tasks)).ok());
    ASSERT_TRUE(threads.Wait().ok());
    for (int i = 0; i < kLanes; ++i) {
      EXPECT_NE(ids[i], std::this_thread::get_id()) << "lane " << i;
      // No thread is created per round: lane i runs on the thread it ran on before.
      if (round == 0) first_round[i] = ids[i];
      EXPECT_EQ(ids[i], first_round[i]) << "lane " << i << ", round " << round;
    }
  }
}

// Run takes the first task on the calling thread, the rest on their lanes.
TEST(ExchangeThreadsTest, RunTakesTheFirstTaskOnTheCaller) {
  ExchangeThreads threads(2);
  std::thread::id ids[2];
  std::vector<ExchangeThreads::Task> tasks;
  for (int i = 0; i < 2; ++i) {
    tasks.push_back([&ids, i] {
      ids[i] = std::this_thread::get_id();
      return absl::OkStatus();
    });
  }
  ASSERT_TRUE(threads.Run(std::move(tasks)).ok());
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_NE(ids[1], std::this_thread::get_id());
  EXPECT_FALSE(threads.in_flight());
}

// The round's error is the first in lane order, whichever lane finished first, and every
// task ran to its end; an empty task leaves its lane idle.
TEST(ExchangeThreadsTest, FirstErrorInLaneOrderAndEveryTaskRuns) {
  ExchangeThreads threads(4);
  absl::Notification lane3_done;
  std::atomic<int> ran{0};
  std::vector<ExchangeThreads::Task> tasks(4);
  tasks[1] = [&] {
    lane3_done.WaitForNotification();  // finishes after lane 3's error
    ++ran;
    return absl::UnavailableError("ps 1 is gone");
  };
  tasks[3] = [&] {
    ++ran;
    lane3_done.Notify();
    return absl::InternalError("ps 3 answered garbage");
  };
  tasks[2] = [&] {
    ++ran;
    return absl::OkStatus();
  };
  absl::Status status = threads.Run(std::move(tasks));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(ran.load(), 3);
  // The next round starts clean.
  std::vector<ExchangeThreads::Task> ok(4, [] { return absl::OkStatus(); });
  EXPECT_TRUE(threads.Run(std::move(ok)).ok());
}

// A started round is in flight while the caller goes on; a second round is refused until
// Wait collects the first, and so are more tasks than lanes.
TEST(ExchangeThreadsTest, StartedRoundStaysInFlightUntilWait) {
  ExchangeThreads threads(2);
  absl::Notification release;
  std::atomic<bool> done{false};
  ASSERT_TRUE(threads
                  .Start({[&] {
                    release.WaitForNotification();
                    done = true;
                    return absl::OkStatus();
                  }})
                  .ok());
  EXPECT_TRUE(threads.in_flight());
  EXPECT_FALSE(done.load());  // it waits for the caller, which got control back
  absl::Status again = threads.Start({[] { return absl::OkStatus(); }});
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  absl::Status run = threads.Run({[] { return absl::OkStatus(); }});
  EXPECT_EQ(run.code(), absl::StatusCode::kFailedPrecondition) << run;
  release.Notify();
  EXPECT_TRUE(threads.Wait().ok());
  EXPECT_TRUE(done.load());
  EXPECT_FALSE(threads.in_flight());
  EXPECT_TRUE(threads.Wait().ok());  // nothing in flight
  std::vector<ExchangeThreads::Task> too_many(3, [] { return absl::OkStatus(); });
  absl::Status refused = threads.Start(std::move(too_many));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_FALSE(threads.in_flight());
}

// Destroying the threads with a round in flight lets the round end first (it writes into
// buffers its owner still holds) and joins every thread.
TEST(ExchangeThreadsTest, DestructorLetsTheRoundInFlightEnd) {
  auto threads = std::make_unique<ExchangeThreads>(2);
  absl::Notification started;
  absl::Notification release;
  std::atomic<bool> done{false};
  ASSERT_TRUE(threads
                  ->Start({nullptr,
                           [&] {
                             started.Notify();
                             release.WaitForNotification();
                             done = true;
                             return absl::OkStatus();
                           }})
                  .ok());
  started.WaitForNotification();
  std::thread destroyer([&] {
    threads.reset();
    EXPECT_TRUE(done.load());
  });
  release.Notify();
  destroyer.join();
  EXPECT_TRUE(done.load());
}

}  // namespace
}  // namespace pstrain
