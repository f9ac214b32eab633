#include "distribute/mirrored_strategy.h"

#include <atomic>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(MirroredDevicesTest, ParsesListsAndRejectsBadForms) {
  auto d = ParseMirroredDevices(" cpu:0, cpu:1 ");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (std::vector<std::string>{"cpu:0", "cpu:1"}));
  EXPECT_EQ(*ParseMirroredDevices("cuda:0,cuda:1"),
            (std::vector<std::string>{"cuda:0", "cuda:1"}));
  // No GPU answers on the build machines: the default is one CPU replica.
  auto def = ParseMirroredDevices("");
  ASSERT_TRUE(def.ok());
  EXPECT_FALSE(def->empty());
  for (const char* bad : {"gpu:0", "cpu", "cpu:x", "cpu:-1", "cpu:0,cpu:0", "cpu:0,"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseMirroredDevices(bad).status())) << bad;
  }
  EXPECT_EQ(BackendDeviceFor("cpu:1"), "cpu");
  EXPECT_EQ(BackendDeviceFor("cuda:1"), "cuda:1");
}

TEST(MirroredStrategyTest, RunsEveryReplicaOnItsOwnThreadConcurrently) {
  MirroredStrategy s({"cpu:0", "cpu:1", "cpu:2"});
  EXPECT_EQ(s.name(), "mirrored");
  EXPECT_EQ(s.num_replicas_in_sync(), 3);
  for (int round = 0; round < 50; ++round) {
    absl::Mutex mu;
    std::set<int> seen;
    std::set<std::thread::id> threads;
    std::atomic<int> arrived{0};
    ASSERT_TRUE(s.Run([&](int r) {
                   // A barrier: passes only when all three run at once.
                   ++arrived;
                   while (arrived.load() < 3) std::this_thread::yield();
                   absl::MutexLock lock(&mu);
                   seen.insert(r);
                   threads.insert(std::this_thread::get_id());
                   return absl::OkStatus();
                 }).ok());
    EXPECT_EQ(seen, (std::set<int>{0, 1, 2}));
    EXPECT_EQ(threads.size(), 3u);
  }
  // The first error in replica order, whatever the timing; every replica still ran.
  std::atomic<int> ran{0};
  absl::Status st = s.Run([&](int r) {
    ++ran;
    return r == 0 ? absl::OkStatus() : absl::InternalError(absl::StrCat("replica ", r));
  });
  EXPECT_EQ(st.message(), "replica 1");
  EXPECT_EQ(ran.load(), 3);
}

}  // namespace
}  // namespace pstrain
