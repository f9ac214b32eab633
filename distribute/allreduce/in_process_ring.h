#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_IN_PROCESS_RING_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_IN_PROCESS_RING_H_

// An in-process RingTransport for tests: N ranks in one process (one thread each), a
// send copying the chunk straight into the next rank's mailbox. A rank can be marked dead
// to test failure handling: sends to it fail UNAVAILABLE naming it, and it never sends.
//
// Thread-safe.

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "distribute/allreduce/chunk_mailbox.h"
#include "distribute/allreduce/ring_transport.h"

namespace pstrain {

class InProcessRing {
 public:
  explicit InProcessRing(int size);

  int size() const { return static_cast<int>(mailboxes_.size()); }
  // The transport of `rank`; owned by the ring, valid for its life.
  RingTransport* transport(int rank) { return transports_[rank].get(); }
  // From now on `rank` neither sends nor accepts chunks (a crashed worker).
  void Kill(int rank);

 private:
  class Transport;
  friend class Transport;

  bool dead(int rank) const;

  std::vector<std::unique_ptr<ChunkMailbox>> mailboxes_;
  std::vector<std::unique_ptr<RingTransport>> transports_;
  mutable absl::Mutex mu_;
  std::vector<bool> dead_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_IN_PROCESS_RING_H_
