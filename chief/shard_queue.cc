#include "chief/shard_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

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
  if (!CanTake()) {
    ++blocked_takes_;
    mu_.Await(absl::Condition(this, &ShardQueue::CanTake));
    --blocked_takes_;
  }
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

int ShardQueue::BlockedTakes() const {
  absl::MutexLock lock(&mu_);
  return blocked_takes_;
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

void ShardQueue::Reopen() {
  absl::MutexLock lock(&mu_);
  closed_ = false;
}

std::vector<ShardQueue::Position> ShardQueue::Positions() const {
  absl::MutexLock lock(&mu_);
  std::vector<Position> positions;
  for (const Shard& s : shards_) positions.push_back({s.next_step, s.finished});
  return positions;
}

absl::Status ShardQueue::Resume(const std::vector<Position>& positions) {
  absl::MutexLock lock(&mu_);
  if (positions.size() != shards_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data positions for ", positions.size(),
                                                   " shards, the epoch has ", shards_.size()));
  }
  for (const Position& p : positions) {
    if (p.next_step < 0) {
      return absl::InvalidArgumentError(absl::StrCat("data position ", p.next_step, " < 0"));
    }
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    shards_[i].next_step = positions[i].next_step;
    shards_[i].finished = positions[i].finished ||
                          (steps_per_shard_ >= 0 && positions[i].next_step >= steps_per_shard_);
  }
  return absl::OkStatus();
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
