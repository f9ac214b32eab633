#ifndef PSTRAIN_PS_SERVER_STALENESS_GATE_H_
#define PSTRAIN_PS_SERVER_STALENESS_GATE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps_server/consistency.h"

namespace pstrain {

// Bounded staleness (CONSISTENCY_BOUNDED_STALENESS): holds a push whose (epoch, step) is
// more than `staleness` steps ahead of the slowest other live worker that pushed in the
// same epoch, until that worker catches up or `timeout` passes. A worker that moved on to a
// later epoch no longer holds anyone back, and one that has not pushed for `timeout` is
// not live (dead, or done with its share of the epoch): it holds the others back for one
// timeout, not for every push after.
//
// Thread-safe: pushes from any number of server threads call Wait at once. Its state sits
// under one small mutex of its own, which nothing else takes, so pushes in other modes
// never wait on it.
class StalenessGate {
 public:
  StalenessGate(int64_t staleness, absl::Duration timeout)
      : staleness_(staleness), timeout_(timeout) {}
  StalenessGate(const StalenessGate&) = delete;
  StalenessGate& operator=(const StalenessGate&) = delete;

  // Records the pusher's progress and returns once it is at most `staleness` steps ahead
  // of the slowest other live worker of its epoch, or after `timeout`. An anonymous push
  // (context.worker empty) is never held back nor recorded.
  void Wait(const PushContext& context) ABSL_LOCKS_EXCLUDED(mu_);

  // Pushes that had to wait at all, and those whose wait ended at the timeout rather
  // than when the slower workers caught up (a straggler or a lost worker shows here).
  int64_t waits() const { return waits_.load(); }
  int64_t timeouts() const { return timeouts_.load(); }
  // The largest lead (in steps, over the slowest live worker of the same epoch) any push
  // was let through with.
  int64_t max_lead() const { return max_lead_.load(); }

 private:
  struct WorkerProgress {
    int32_t epoch = 0;
    int64_t step = 0;
    absl::Time last_push;
  };

  // The largest lead of `context` over the live workers of its epoch other than itself
  // (0 when there is none).
  int64_t LeadOverSlowest(const PushContext& context, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t staleness_;
  const absl::Duration timeout_;

  // Each worker's latest pushed (epoch, step), by the name its pushes carry.
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, WorkerProgress> progress_ ABSL_GUARDED_BY(mu_);

  // Counters for status pages: atomics, read without the lock.
  std::atomic<int64_t> waits_{0};
  std::atomic<int64_t> timeouts_{0};
  // Written under mu_.
  std::atomic<int64_t> max_lead_{0};
  // A timed-out wait is logged once per gate, not once per push.
  std::atomic<bool> logged_timeout_{false};
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_STALENESS_GATE_H_
