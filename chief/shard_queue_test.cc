#include "chief/shard_queue.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ShardQueueTest, ChunksOfOneShardComeInOrderUntilEndOfData) {
  ShardQueue queue(1, 2, -1);
  for (int64_t first = 0; first < 6; first += 2) {
    std::optional<ShardQueue::Chunk> chunk = queue.Take({0});
    ASSERT_TRUE(chunk.has_value());
    EXPECT_EQ(chunk->shard, 0);
    EXPECT_EQ(chunk->first_step, first);
    EXPECT_EQ(chunk->steps, 2);
    queue.Complete(*chunk, 2, false);
    EXPECT_FALSE(queue.Done());
  }
  std::optional<ShardQueue::Chunk> last = queue.Take({0});
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->first_step, 6);
  queue.Complete(*last, 1, /*end_of_data=*/true);
  EXPECT_TRUE(queue.Done());
  EXPECT_FALSE(queue.Take({0}).has_value());
}

TEST(ShardQueueTest, OwnShardFirstThenAnyOtherAndOneHolderPerShard) {
  ShardQueue queue(3, 4, -1);
  std::optional<ShardQueue::Chunk> a = queue.Take({1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->shard, 1);
  // Shard 1 is held: whoever prefers it gets the lowest free shard instead.
  std::optional<ShardQueue::Chunk> b = queue.Take({1});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->shard, 0);
  std::optional<ShardQueue::Chunk> c = queue.Take({0, 1});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->shard, 2);
  queue.Complete(*a, 4, false);
  std::optional<ShardQueue::Chunk> d = queue.Take({2});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->shard, 1);
  EXPECT_EQ(d->first_step, 4);
  EXPECT_EQ(queue.Unfinished(), (std::vector<int>{0, 1, 2}));
}

TEST(ShardQueueTest, AReturnedChunkIsHandedOutAgainFromItsFirstStep) {
  ShardQueue queue(2, 3, -1);
  std::optional<ShardQueue::Chunk> a = queue.Take({0});
  queue.Complete(*a, 3, false);
  std::optional<ShardQueue::Chunk> lost = queue.Take({0});
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->first_step, 3);
  queue.Return(*lost);
  std::optional<ShardQueue::Chunk> again = queue.Take({1, 0});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->shard, 1);
  std::optional<ShardQueue::Chunk> retried = queue.Take({1});
  ASSERT_TRUE(retried.has_value());
  EXPECT_EQ(retried->shard, 0);
  EXPECT_EQ(retried->first_step, 3);
  EXPECT_EQ(retried->steps, 3);
}

TEST(ShardQueueTest, StepsPerShardCapsTheLastChunkAndFinishesTheShard) {
  ShardQueue queue(2, 4, 6);
  int64_t total = 0;
  while (std::optional<ShardQueue::Chunk> chunk = queue.Take({})) {
    EXPECT_LE(chunk->first_step + chunk->steps, 6);
    total += chunk->steps;
    queue.Complete(*chunk, chunk->steps, false);
  }
  EXPECT_EQ(total, 12);
  EXPECT_TRUE(queue.Done());
}

TEST(ShardQueueTest, AChunkThatRanNoStepFinishesItsShard) {
  ShardQueue queue(1, 4, -1);
  std::optional<ShardQueue::Chunk> chunk = queue.Take({0});
  queue.Complete(*chunk, 0, false);
  EXPECT_TRUE(queue.Done());
}

// Until the queue counts `n` blocked Takes (or a minute passes, a failure).
bool WaitForBlockedTakes(const ShardQueue& queue, int n) {
  const absl::Time end = absl::Now() + absl::Minutes(1);
  while (queue.BlockedTakes() != n) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(ShardQueueTest, TakeWaitsForAHeldShardToBeReturned) {
  ShardQueue queue(1, 2, -1);
  EXPECT_EQ(queue.BlockedTakes(), 0);
  std::optional<ShardQueue::Chunk> held = queue.Take({0});
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(queue.BlockedTakes(), 0);  // a free shard: no wait
  std::atomic<bool> taken{false};
  std::optional<ShardQueue::Chunk> second;
  std::thread waiter([&] {
    second = queue.Take({0});
    taken = true;
  });
  // The waiter is inside Take and blocked there: it has not taken the held shard.
  EXPECT_TRUE(WaitForBlockedTakes(queue, 1));
  EXPECT_FALSE(taken.load());
  queue.Return(*held);
  waiter.join();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->first_step, 0);
  EXPECT_EQ(queue.BlockedTakes(), 0);
}

TEST(ShardQueueTest, TakeEndsWhenTheLastHeldShardFinishesOrTheQueueCloses) {
  ShardQueue queue(1, 2, -1);
  std::optional<ShardQueue::Chunk> held = queue.Take({0});
  std::optional<ShardQueue::Chunk> none = ShardQueue::Chunk{};
  std::thread waiter([&] { none = queue.Take({0}); });
  EXPECT_TRUE(WaitForBlockedTakes(queue, 1));  // blocked, so the Complete below wakes it
  queue.Complete(*held, 1, /*end_of_data=*/true);
  waiter.join();
  EXPECT_FALSE(none.has_value());

  ShardQueue closing(1, 2, -1);
  std::optional<ShardQueue::Chunk> h = closing.Take({0});
  ASSERT_TRUE(h.has_value());  // held, so the next Take blocks
  std::optional<ShardQueue::Chunk> n = ShardQueue::Chunk{};
  std::thread w([&] { n = closing.Take({0}); });
  EXPECT_TRUE(WaitForBlockedTakes(closing, 1));  // blocked, so the Close below wakes it
  closing.Close();
  w.join();
  EXPECT_FALSE(n.has_value());
  EXPECT_FALSE(closing.Done());
}

TEST(ShardQueueTest, PausedQueueReopensWherePositionsStandAndResumesFromThem) {
  ShardQueue queue(2, 3, 9);
  std::optional<ShardQueue::Chunk> a = queue.Take({0});
  std::optional<ShardQueue::Chunk> b = queue.Take({1});
  ASSERT_TRUE(a.has_value() && b.has_value());
  queue.Complete(*a, 3, false);
  // Paused while b is in flight: b's shard stays at its chunk's first step.
  queue.Close();
  EXPECT_FALSE(queue.Take({0}).has_value());
  std::vector<ShardQueue::Position> positions = queue.Positions();
  ASSERT_EQ(positions.size(), 2u);
  EXPECT_EQ(positions[0].next_step, 3);
  EXPECT_EQ(positions[1].next_step, 0);
  queue.Return(*b);
  queue.Reopen();
  std::optional<ShardQueue::Chunk> again = queue.Take({1});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->shard, 1);
  EXPECT_EQ(again->first_step, 0);

  // A new queue resumed from the saved positions hands out the same next chunks.
  ShardQueue resumed(2, 3, 9);
  ASSERT_TRUE(resumed.Resume({{6, false}, {9, false}}).ok());
  std::optional<ShardQueue::Chunk> next = resumed.Take({1});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->shard, 0);  // shard 1 reached its 9 steps: finished
  EXPECT_EQ(next->first_step, 6);
  EXPECT_EQ(next->steps, 3);
  resumed.Complete(*next, 3, false);
  EXPECT_TRUE(resumed.Done());

  EXPECT_FALSE(ShardQueue(2, 3, 9).Resume({{0, false}}).ok());
  EXPECT_FALSE(ShardQueue(1, 3, 9).Resume({{-1, false}}).ok());
}

}  // namespace
}  // namespace pstrain
