#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_CHUNK_MAILBOX_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_CHUNK_MAILBOX_H_

// Where a rank's incoming chunks wait until its all-reduce takes them: the receiving half
// of every RingTransport. Chunks may arrive before they are wanted (the left neighbour
// runs ahead) or for a later collective; each is taken exactly once.
//
// Thread-safe.

#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "distribute/allreduce/ring_transport.h"

namespace pstrain {

class ChunkMailbox {
 public:
  // Stores `data` under `key`, replacing a chunk not yet taken (a retried send).
  void Deliver(const ChunkKey& key, ChunkData data);

  // Removes and returns the chunk under `key`, waiting up to `wait`.
  // Errors: DEADLINE_EXCEEDED when it has not come; CANCELLED after Close().
  absl::StatusOr<ChunkData> Take(const ChunkKey& key, absl::Duration wait);

  // Wakes every waiter with CANCELLED, now and later.
  void Close();

  // Chunks delivered and not taken.
  size_t pending() const;

 private:
  mutable absl::Mutex mu_;
  std::map<ChunkKey, ChunkData> chunks_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_CHUNK_MAILBOX_H_
