#include "chief/shard_queue.h"

#include <algorithm>

namespace pstrain {

ShardQueue::ShardQueue(int num_shards, int64_t steps_per_chunk, int64_t steps_per_shard)
    : steps_per_chunk_(std::max<int64_t>(1, steps_per_chunk)),
      steps_per_shard_(steps_per_shard),
      shards_(std::max(0, num_shards)) {
  if (steps_per_shard_ == 0) {
    for (Shard& s : shards_) s.finished = true;
  }
}

bool ShardQueue::Available(int shard) const {
  return shard >= 0 && shard < static_cast<int>(shards_.size()) && !shards_[shard].held &&
         !shards_[shard].finished;
}

bool ShardQueue::AllFinished() const {
  return std::all_of(shards_.begin(), shards_.end(), [](const Shard& s) { return s.finished; });
}

bool ShardQueue::CanTake() const {
  if (closed_ || AllFinished()) return true;
  for (int i = 0; i < static_cast<int>(shards_.size()); ++i) {
    if (Available(i)) return true;
  }
  return false;
}

std::optional<ShardQueue::Chunk> ShardQueue::Take(const std::vector<int>& preferred) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &ShardQueue::CanTake));
  if (closed_ || AllFinished()) return std::nullopt;
  int chosen = -1;
  for (int shard : preferred) {
    if (Available(shard)) {
      chosen = shard;
      break;
    }
  }
  for (int i = 0; chosen < 0 && i < static_cast<int>(shards_.size()); ++i) {
    if (Available(i)) chosen = i;
  }
  Shard& s = shards_[chosen];
  s.held = true;
  Chunk chunk;
  chunk.shard = chosen;
  chunk.first_step = s.next_step;
  chunk.steps = steps_per_shard_ < 0 ? steps_per_chunk_
                                     : std::min(steps_per_chunk_, steps_per_shard_ - s.next_step);
  return chunk;
}

void ShardQueue::Release(const Chunk& chunk) {
  if (chunk.shard < 0 || chunk.shard >= static_cast<int>(shards_.size())) return;
  shards_[chunk.shard].held = false;
}

void ShardQueue::Complete(const Chunk& chunk, int64_t steps, bool end_of_data) {
  absl::MutexLock lock(&mu_);
  Release(chunk);
  if (chunk.shard < 0 || chunk.shard >= static_cast<int>(shards_.size())) return;
  Shard& s = shards_[chunk.shard];
  s.next_step = chunk.first_step + std::max<int64_t>(0, steps);
  if (end_of_data || steps <= 0 || (steps_per_shard_ >= 0 && s.next_step >= steps_per_shard_)) {
    s.finished = true;
  }
}

void ShardQueue::Return(const Chunk& chunk) {
  absl::MutexLock lock(&mu_);
  Release(chunk);
}

void ShardQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool ShardQueue::Done() const {
  absl::MutexLock lock(&mu_);
  return AllFinished();
}

std::vector<int> ShardQueue::Unfinished() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> unfinished;
  for (int i = 0; i < static_cast<int>(shards_.size()); ++i) {
    if (!shards_[i].finished) unfinished.push_back(i);
  }
  return unfinished;
}

}  // namespace pstrain
