#include "distribute/allreduce/chunk_mailbox.h"

#include <utility>

namespace pstrain {

void ChunkMailbox::Deliver(const ChunkKey& key, ChunkData data) {
  absl::MutexLock lock(&mu_);
  chunks_[key] = std::move(data);
}

absl::StatusOr<ChunkData> ChunkMailbox::Take(const ChunkKey& key, absl::Duration wait) {
  struct Arg {
    ChunkMailbox* self;
    const ChunkKey* key;
  } arg{this, &key};
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(
                           +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                             return a->self->closed_ || a->self->chunks_.count(*a->key) > 0;
                           },
                           &arg),
                       wait);
  if (closed_) return absl::CancelledError("all-reduce transport shut down");
  auto it = chunks_.find(key);
  if (it == chunks_.end()) return absl::DeadlineExceededError("chunk not received yet");
  ChunkData data = std::move(it->second);
  chunks_.erase(it);
  return data;
}

void ChunkMailbox::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

size_t ChunkMailbox::pending() const {
  absl::MutexLock lock(&mu_);
  return chunks_.size();
}

}  // namespace pstrain
