#ifndef PSTRAIN_CHIEF_SHARD_QUEUE_H_
#define PSTRAIN_CHIEF_SHARD_QUEUE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// One epoch's work as TensorFlow's ClusterCoordinator schedules it: every data shard has a
// next step; workers take chunks of steps of unfinished shards, at least once each. A
// shard has at most one holder at a time (its batcher position lives on that worker). A
// chunk whose answer arrived advances its shard; a chunk whose answer never came is
// returned and handed out again from the same first step. Thread-safe; knows no RPC.
class ShardQueue {
 public:
  struct Chunk {
    int shard = 0;
    int64_t first_step = 0;
    int64_t steps = 0;
  };
  // Where a shard stands: the first step not yet acknowledged, and whether it is done.
  // A chunk still in flight is not counted, so resuming from a position runs it again
  // (at least once).
  struct Position {
    int64_t next_step = 0;
    bool finished = false;
  };

  // `steps_per_shard` < 0: a shard runs until a chunk reports the end of its data;
  // otherwise it is finished after that many steps (repeating data).
  ShardQueue(int num_shards, int64_t steps_per_chunk, int64_t steps_per_shard);

  // The next chunk of the first free, unfinished shard in `preferred` order, else of the
  // lowest-numbered free, unfinished one. Blocks while every unfinished shard is held by
  // someone else. nullopt once every shard is finished or the queue is closed.
  std::optional<Chunk> Take(const std::vector<int>& preferred) ABSL_LOCKS_EXCLUDED(mu_);

  // The chunk's answer arrived: `steps` were run; `end_of_data` the shard has no more.
  // A chunk that ran no step also finishes its shard (it would never progress).
  void Complete(const Chunk& chunk, int64_t steps, bool end_of_data) ABSL_LOCKS_EXCLUDED(mu_);

  // The chunk's answer never came: its shard is free again at the chunk's first step.
  void Return(const Chunk& chunk) ABSL_LOCKS_EXCLUDED(mu_);

  // Wakes every Take, which answers nullopt until Reopen (the epoch failed, or it pauses
  // for a checkpoint or a ps recovery).
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  // Take hands out chunks again, from where each shard stands.
  void Reopen() ABSL_LOCKS_EXCLUDED(mu_);

  // Every shard's position, in shard order (for a checkpoint's data positions).
  std::vector<Position> Positions() const ABSL_LOCKS_EXCLUDED(mu_);
  // Continues from positions saved by Positions() (a restored checkpoint), before any
  // Take. Errors: INVALID_ARGUMENT another number of shards, or a negative step.
  absl::Status Resume(const std::vector<Position>& positions) ABSL_LOCKS_EXCLUDED(mu_);

  // Takes blocked right now, waiting for a held shard to be returned or finished (a
  // worker idle while others hold every unfinished shard). Lets a test wait for a Take to
  // block instead of sleeping and hoping it did.
  int BlockedTakes() const ABSL_LOCKS_EXCLUDED(mu_);

  // Every shard finished.
  bool Done() const ABSL_LOCKS_EXCLUDED(mu_);
  // Shards not finished yet, in order.
  std::vector<int> Unfinished() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Shard {
    int64_t next_step = 0;
    bool held = false;
    bool finished = false;
  };
  bool Available(int shard) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanTake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllFinished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(const Chunk& chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t steps_per_chunk_;
  const int64_t steps_per_shard_;
  mutable absl::Mutex mu_;
  std::vector<Shard> shards_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int blocked_takes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_SHARD_QUEUE_H_
