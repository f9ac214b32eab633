#ifndef PSTRAIN_PS_SERVER_SYNC_AGGREGATOR_H_
#define PSTRAIN_PS_SERVER_SYNC_AGGREGATOR_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
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
// A table (an Embedding, or a row shard of one) is aggregated by rows (PushRows), as
// TensorFlow's SyncReplicasOptimizer accumulates IndexedSlices: each gradient carries only
// the rows its batch touched, the rows several pushers sent are summed per row, and the
// mean (the sum over the pushers that joined, rows or not, divided by their count) is
// applied once to those rows only. That is the dense aggregate of the same gradients with
// zeros in the other rows, to the last bit: adding a zero leaves a sum as it was, and the
// row update of SGD and Adagrad is the dense update's arithmetic on a row whose gradient
// is not zero (Optimizer::ApplyRows). A pusher whose batch missed the table still joins
// with no rows, so the mean divides by the same count as the dense one. The aggregate
// holds the rows pushed, never more than the table.
//
// Thread-safe. Each variable's aggregate lives beside the variable, under its lock (see
// Variable); the aggregator's own record of who pushed when sits under a small mutex of
// its own, never held while a variable's lock is taken.
class SyncAggregator {
 public:
  // One variable's aggregate: the sum and count of the gradients computed at its current
  // version and not applied yet. Guarded by its variable's lock. While only row gradients
  // joined, the sum is by rows (`rows`, ascending and distinct, and `row_sums`, a row of
  // `row_width` values each) and `sum` is empty or zeros; once a dense gradient joins,
  // the rows are folded into `sum` (`dense`), so the aggregate never holds the table twice.
  struct Pending {
    std::vector<float> sum;
    bool dense = false;
    std::vector<int64_t> rows;
    std::vector<float> row_sums;
    int64_t row_width = 0;
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
    // The same for the mean of a row aggregate: `row_means` holds rows.size() rows, of
    // rows `rows` (ascending, distinct, in range), applied with the variable's row update
    // (Optimizer::ApplyRows) to those rows only, or not at all when its result would not
    // be finite. No rows (every pusher missed the table): an update of zeros, which moves
    // no value but counts (the optimizer's iterations, as the dense update's would).
    virtual bool ApplyRowsMean(absl::Span<const int64_t> rows,
                               absl::Span<const float> row_means) = 0;
    virtual void BumpVersion() = 0;
  };

  // A row gradient as the aggregator takes it: `values` holds rows.size() rows of `width`
  // values, the gradient of rows `rows` (ascending, distinct, in range: the caller summed
  // repeated rows and checked the rest), finite. No rows: the pusher joins the aggregate
  // with nothing to add.
  struct RowGradient {
    std::string name;
    absl::Span<const int64_t> rows;
    absl::Span<const float> values;
    int64_t width = 0;
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
  // As Push, for row gradients of table variables (see the class comment): each joins
  // its variable's aggregate row by row. A gradient whose rows' sums with the aggregate
  // overflow a float stays out of it.
  void PushRows(const PushContext& context, absl::Span<Variable* const> variables,
                absl::Span<const RowGradient> gradients, absl::Span<const int64_t> versions)
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

  // Push and PushRows: gradient i (named names(i)) joins variables[i]'s aggregate through
  // add(i, pending) (with the variable's lock held; false: its sum would overflow, it
  // stays out) when versions[i] is the variable's version, then the push waits as Push
  // says.
  void Aggregate(const PushContext& context, absl::Span<Variable* const> variables,
                 absl::Span<const int64_t> versions,
                 absl::FunctionRef<const std::string&(size_t)> names,
                 absl::FunctionRef<bool(size_t, Pending&)> add)
      ABSL_LOCKS_EXCLUDED(progress_mu_);

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
