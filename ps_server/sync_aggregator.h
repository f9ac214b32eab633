#ifndef PSTRAIN_PS_SERVER_SYNC_AGGREGATOR_H_
#define PSTRAIN_PS_SERVER_SYNC_AGGREGATOR_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "ps_server/consistency.h"

namespace pstrain {

// Sync mode (CONSISTENCY_SYNC), as TensorFlow's SyncReplicasOptimizer: per variable, the
// gradients computed at its current version are summed until `replicas_to_aggregate` have
// arrived, then their mean is applied once and the version bumped; a gradient of another
// version is dropped (stale()). A push returns once the version of every variable it
// contributed to advanced, or after `timeout`, when the partial mean is applied, so a
// straggler never hangs the job. A worker that has not pushed for `timeout` (killed, or
// done with its share) stops counting towards the aggregate until it pushes again, so it
// costs one timeout instead of one per step.
//
// Thread-safe. Each variable's aggregate lives beside the variable, under its lock (see
// Variable); the aggregator's own record of who pushed when sits under a small mutex of
// its own, never held while a variable's lock is taken.
class SyncAggregator {
 public:
  // One variable's aggregate: the sum and count of the gradients computed at its current
  // version and not applied yet. Guarded by its variable's lock.
  struct Pending {
    std::vector<float> sum;
    int count = 0;
    // Drops what was summed (a restore replaces the value it was computed against).
    void Clear();
  };

  // A variable as the aggregator sees it (the ps's store implements it, tests fake it).
  // The aggregator calls every method but mu() with mu() held.
  class Variable {
   public:
    virtual ~Variable() = default;
    virtual absl::Mutex& mu() = 0;
    virtual int64_t version() = 0;
    virtual Pending& pending() = 0;
    // Applies `mean` with the variable's own update rule, whole, or not at all when its
    // result would not be finite; returns whether it was applied. The aggregator bumps the
    // version either way (the gradients were accepted; the aggregate is done).
    virtual bool ApplyMean(absl::Span<const float> mean) = 0;
    virtual void BumpVersion() = 0;
  };

  // replicas_to_aggregate >= 1 and timeout > 0 (ValidateConsistency checked the config).
  SyncAggregator(int replicas_to_aggregate, absl::Duration timeout)
      : replicas_to_aggregate_(replicas_to_aggregate), timeout_(timeout) {}
  SyncAggregator(const SyncAggregator&) = delete;
  SyncAggregator& operator=(const SyncAggregator&) = delete;

  // Adds gradients[i] (finite, of variables[i]'s shape: the caller checked) to the
  // aggregate of variables[i] when versions[i] is its version, then waits until every
  // aggregate it joined was applied, applying a partial one at the deadline. Every
  // gradient joins its aggregate before the push waits on any, so a push that carries
  // several variables never holds up the aggregates of the later ones. A gradient whose
  // sum with the aggregate overflows a float stays out of it, and an aggregate whose
  // update would overflow is dropped (both counted in nonfinite_dropped()).
  void Push(const PushContext& context, absl::Span<Variable* const> variables,
            absl::Span<const NamedTensor> gradients, absl::Span<const int64_t> versions)
      ABSL_LOCKS_EXCLUDED(progress_mu_);

  // Gradients dropped because they were computed at another version.
  int64_t stale() const { return stale_.load(); }
  // Pushes that waited for an aggregate to fill, and those whose wait ended at the
  // timeout.
  int64_t waits() const { return waits_.load(); }
  int64_t timeouts() const { return timeouts_.load(); }
  // Per variable: updates of exactly replicas_to_aggregate gradients, of fewer, and the
  // gradients they averaged.
  int64_t full_updates() const { return full_.load(); }
  int64_t partial_updates() const { return partial_.load(); }
  int64_t aggregated_gradients() const { return aggregated_.load(); }
  // Gradients kept out of an aggregate, and aggregates dropped, for overflowing a float.
  int64_t nonfinite_dropped() const { return nonfinite_dropped_.load(); }

 private:
  // Records the pusher's push and returns how many gradients make an aggregate now:
  // replicas_to_aggregate less one for each worker that pushed before but not for
  // `timeout`, at least 1.
  int LiveReplicas(const PushContext& context) ABSL_LOCKS_EXCLUDED(progress_mu_);

  // Applies the mean of v's pending gradients, bumps its version and empties the
  // aggregate; counts the update as full when it averaged replicas_to_aggregate gradients.
  // With v.mu() held.
  void ApplyPending(Variable& v);

  // Counts and logs (once) a gradient or an aggregate dropped for overflowing.
  void DropNonFinite(const std::string& what);

  const int replicas_to_aggregate_;
  const absl::Duration timeout_;

  // When each worker last pushed, by the name its pushes carry.
  absl::Mutex progress_mu_;
  absl::flat_hash_map<std::string, absl::Time> last_push_ ABSL_GUARDED_BY(progress_mu_);

  // Counters for status pages: atomics, read without any lock.
  std::atomic<int64_t> stale_{0};
  std::atomic<int64_t> waits_{0};
  std::atomic<int64_t> timeouts_{0};
  std::atomic<int64_t> full_{0};
  std::atomic<int64_t> partial_{0};
  std::atomic<int64_t> aggregated_{0};
  std::atomic<int64_t> nonfinite_dropped_{0};
  // Each of these is logged once per aggregator, not once per push.
  std::atomic<bool> logged_shrink_{false};
  std::atomic<bool> logged_timeout_{false};
  std::atomic<bool> logged_nonfinite_{false};
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_SYNC_AGGREGATOR_H_
