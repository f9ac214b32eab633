#ifndef PSTRAIN_COMMON_RPC_REPLAY_CACHE_H_
#define PSTRAIN_COMMON_RPC_REPLAY_CACHE_H_

// Refuses a call seen before: a server's memory of the (time, nonce) pairs of the calls it
// accepted, so that a MAC overheard on the wire (common/rpc/call_mac.h) cannot be sent
// again.
//
// A call's time must lie within `max_skew` of the server's clock; a pair is remembered
// until its time falls out of that window, after which the time alone refuses it. The
// memory is bounded: when `capacity` pairs are held, the oldest is dropped and every call
// at or before its time is refused from then on (a low-water mark), so a replay is
// refused either way. Past the capacity a call delayed on the wire longer than the
// remembered span is refused too: with the default capacity that takes more than 2,000
// calls a second to one server for a minute, far past any job's rate.
//
// Thread-safe.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

class ReplayCache {
 public:
  static constexpr absl::Duration kDefaultMaxSkew = absl::Minutes(1);
  static constexpr size_t kDefaultCapacity = 1 << 17;

  explicit ReplayCache(absl::Duration max_skew = kDefaultMaxSkew,
                       size_t capacity = kDefaultCapacity);

  // Admits the call made at `time_micros` (Unix time) with `nonce` and remembers it.
  // Errors: UNAUTHENTICATED a time more than max_skew from `now`, at or before the
  //         low-water mark, or a (time, nonce) admitted before (a replay).
  absl::Status Admit(int64_t time_micros, absl::string_view nonce, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Pairs held now (at most the capacity).
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int64_t max_skew_micros_;
  const size_t capacity_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  // Ordered by time, so that the oldest go first.
  absl::btree_set<std::pair<int64_t, std::string>> seen_ ABSL_GUARDED_BY(mu_);
  // Calls at or before this time are refused: their pairs may have been dropped.
  int64_t low_water_micros_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_REPLAY_CACHE_H_
