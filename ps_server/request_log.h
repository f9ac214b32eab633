#ifndef PSTRAIN_PS_SERVER_REQUEST_LOG_H_
#define PSTRAIN_PS_SERVER_REQUEST_LOG_H_

#include <cstddef>
#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

// The request ids of recent pushes, so that a retried push (the same id) is applied at
// most once. A client that was told its push failed (a deadline, a cancelled stream, a
// dropped connection) cannot know whether the ps applied it; it retries with the same id
// and the ps answers the retry without applying it a second time.
//
// Remembers the newest `capacity` ids (oldest forgotten first), so memory is bounded
// whatever a peer sends. Thread-safe.
class RequestLog {
 public:
  explicit RequestLog(size_t capacity = 1 << 16) : capacity_(capacity) {}
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  enum class Claim {
    kApply,      // the caller applies the request, then calls Finish(id, ...)
    kDuplicate,  // the id was applied already: answer without applying
    kBusy,       // another call with this id is still applying it after `wait`
  };

  // Claims `id` (non-zero). While another call holds the claim, waits up to `wait` for
  // it to finish: its success makes this a duplicate, its failure hands the claim over.
  Claim Begin(uint64_t id, absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the claim Begin gave: `applied` remembers the id as done; otherwise it is
  // forgotten, so that a retry applies it.
  void Finish(uint64_t id, bool applied) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class State { kApplying, kApplied };

  const size_t capacity_;
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, State> states_ ABSL_GUARDED_BY(mu_);
  // Ids in the order they were applied, oldest first (kApplying ones are not listed).
  std::deque<uint64_t> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_REQUEST_LOG_H_
