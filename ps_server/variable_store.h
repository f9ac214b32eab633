#ifndef PSTRAIN_PS_SERVER_VARIABLE_STORE_H_
#define PSTRAIN_PS_SERVER_VARIABLE_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model/optimizer.h"
#include "common/model/row_initializer.h"
#include "common/tensor.h"
#include "common/variable_snapshot.h"
#include "proto/ps.pb.h"
#include "ps_server/consistency.h"
#include "ps_server/request_log.h"
#include "ps_server/sparse_rows.h"
#include "ps_server/staleness_gate.h"
#include "ps_server/sync_aggregator.h"

namespace pstrain {

// The variables one ps task owns, with the optimizer that updates them. Knows nothing
// of gRPC (ps_server/rpc/ adapts it).
//
// Thread-safe. Each variable has its own lock, so pushes to different variables proceed
// in parallel and a pull never sees a half-applied update; the map itself is guarded by
// a reader/writer lock taken only briefly to find a variable.
//
// Consistency (ConsistencyConfig, set by the first CreateVariables): "async" applies every
// push at once; "bounded_staleness" passes each push through a StalenessGate
// (staleness_gate.h) before applying it; "sync" hands pushes to a SyncAggregator
// (sync_aggregator.h), which sums them per variable (a row push's by rows), beside the
// variable under its lock, and applies their mean through the variable's update rule.
// Async pushes never take a store-wide lock.
class VariableStore {
 public:
  struct VariableInfo {
    std::string name;
    std::vector<int64_t> shape;
    int64_t version = 0;
  };

  using Snapshot = VariableSnapshot;

  VariableStore() = default;
  VariableStore(const VariableStore&) = delete;
  VariableStore& operator=(const VariableStore&) = delete;

  // Creates variables with initial values; the first call also sets the optimizer (and
  // the moving-average rules of optimizer.moving_averages: a variable listed there, or a
  // shard of one, folds each pushed value in as a moving average instead).
  // All-or-nothing. Re-creating a variable with the same shape keeps its current value
  // (a restarted chief repeats the call).
  // Errors: INVALID_ARGUMENT empty or duplicate name, unknown optimizer, or an optimizer
  //         that differs from the one already set; ALREADY_EXISTS same name, other shape.
  // The first call also sets the consistency mode; a later call must repeat it.
  // Errors: INVALID_ARGUMENT also an invalid consistency config, or one that differs from
  //         the one already set, or an initial value holding a NaN or an infinity
  //         (counted in nonfinite_refused()); RESOURCE_EXHAUSTED the variables with their
  //         optimizer slots, each twice (an update is computed aside, then swapped in),
  //         would pass the memory budget (--max_memory).
  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency = ConsistencyConfig());
  // As above, and also the `drawn` variables, whose values this ps draws itself from
  // their initializers (common/model/row_initializer.h): the chief sends how, never the
  // values. Every initializer is validated, and the memory budget checked for every
  // variable, before any value is drawn; a variable that exists already (same shape) is
  // not drawn again. The values are drawn without holding the store's lock.
  // Errors: as above, and INVALID_ARGUMENT an initializer that ValidateRowRange refuses
  //         (named), a name given in both lists.
  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               std::vector<InitialShard> drawn, const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency);

  // Current values of `names`, in order; `versions` (may be null) gets each variable's
  // count of applied updates. Nothing is copied before the request is found to fit.
  // Errors: NOT_FOUND an unknown name; INVALID_ARGUMENT a name given twice;
  //         RESOURCE_EXHAUSTED the values hold more than `max_bytes` bytes.
  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names,
                                           std::vector<int64_t>* versions,
                                           int64_t max_bytes = INT64_MAX) const;

  // Applies every gradient with the optimizer. Every gradient is validated before any is
  // applied, so a bad request changes nothing.
  // `context` says who pushes and at which step and versions (see the class comment);
  // in sync or bounded_staleness mode the call may block up to timeout_ms.
  // A gradient holding a NaN or an infinity, or one whose update would overflow a float
  // (a value or an optimizer slot would not be finite; checked for every variable before
  // any changes, under the locks of every variable pushed, held until all are applied),
  // changes nothing: the push is refused (INVALID_ARGUMENT, nonfinite_refused()) or, when
  // the optimizer's policy is NONFINITE_SKIP, dropped with OK (nonfinite_skipped()). In
  // sync mode a gradient whose sum with the aggregate overflows stays out of it, and an
  // aggregate whose update would overflow is dropped; both are counted in
  // nonfinite_skipped(). A push whose
  // context.request_id was applied before returns OK without applying
  // (duplicate_pushes()); one still being applied by another call is waited for.
  // Errors: NOT_FOUND unknown variable; INVALID_ARGUMENT a shape differs from the
  //         variable's, a name repeats, a non-finite value, or (sync) context.versions is
  //         not aligned with the gradients; FAILED_PRECONDITION no variables created yet;
  //         ABORTED the same request_id is still being applied by another call.
  absl::Status Push(absl::Span<const NamedTensor> gradients,
                    const PushContext& context = PushContext());

  // The rows `rows` of variable `name` in that order, as [rows.size(), shape[1], ...],
  // read under the variable's lock; `version` (may be null) gets its count of applied
  // updates. Each row may be asked once, so an answer is never larger than the variable
  // (a small request naming one row 60,000 times cannot make a huge answer). In sync
  // mode a pull may ask no rows: it answers [0, shape[1], ...] and the version (what a
  // worker whose batch missed a table shard pushes against, PushRows).
  // Errors: NOT_FOUND an unknown name; INVALID_ARGUMENT a rank-0 variable, no rows
  //         (outside sync mode), a row outside [0, shape[0]) or asked twice;
  //         RESOURCE_EXHAUSTED the rows hold more than `max_bytes` bytes.
  absl::StatusOr<Tensor> PullRows(const std::string& name, absl::Span<const int64_t> rows,
                                  int64_t* version, int64_t max_bytes = INT64_MAX) const;

  // Applies row-sparse gradients (sparse_rows.h): each gradient's repeated rows are summed, then its
  // variable's update rule runs on those rows only (Optimizer::ApplyRows: SGD and Adagrad
  // as the dense update of the same gradient, Adam and momentum lazily) and the variable's
  // version is bumped. Validated as Push validates, every gradient before any is applied;
  // the non-finite policy, request ids, counters and the bounded-staleness wait are
  // Push's. In sync mode each gradient, its repeated rows summed, joins its variable's
  // aggregate by rows (SyncAggregator::PushRows: rows several workers pushed are summed
  // per row, and the mean applied once by the row update), with context.versions as
  // Push's; a gradient may carry no rows there (the pusher joins the aggregate with
  // nothing to add, as its dense gradient of zeros would).
  // A finite push whose repeated rows sum to an infinity, or whose update would take a
  // row or one of its optimizer slots out of the floats, is refused (or dropped under
  // NONFINITE_SKIP) as Push refuses one: checked for every variable before any changes,
  // under the locks that apply them.
  // Errors: NOT_FOUND unknown variable; INVALID_ARGUMENT a name repeats, a rank-0
  //         variable, values whose shape is not [rows.size(), row shape], no rows
  //         (outside sync mode), a row out of range, a non-finite value, a sum or an
  //         update that overflows, or (sync) context.versions not aligned with the
  //         gradients; FAILED_PRECONDITION no variables created yet; ABORTED the same
  //         request_id is still being applied.
  absl::Status PushRows(absl::Span<const SparseGradient> gradients,
                        const PushContext& context = PushContext());

  // The state of `names` in order (empty = every variable, by name), each variable read
  // under its own lock, so each one is consistent with itself (value, slots and
  // iterations of one update) though not with the others.
  // Errors: NOT_FOUND an unknown name; INVALID_ARGUMENT a name given twice.
  absl::StatusOr<std::vector<Snapshot>> ReadState(absl::Span<const std::string> names) const;

  // One variable's state as ReadState would copy it, but borrowed: valid only inside the
  // VisitState call that passes it.
  struct StateView {
    absl::Span<const float> value;
    std::vector<int64_t> shape;
    int64_t version = 0;
    int64_t iterations = 0;
    std::vector<std::pair<std::string, absl::Span<const float>>> slots;  // optimizer's order
  };
  // Calls `visit` with variable `name`'s state, under that variable's lock (shared: pulls
  // go on, updates of this variable wait until `visit` returns), and returns its status.
  // For a caller that streams the state out (a checkpoint shard written to disk) without a
  // copy: a ps's rows of a large table and their optimizer slots are most of its memory,
  // and a copy would double its peak.
  // Errors: NOT_FOUND an unknown name; `visit`'s.
  absl::Status VisitState(const std::string& name,
                          absl::FunctionRef<absl::Status(const StateView&)> visit) const;

  // Replaces each variable's value, version, iterations and the slots given (others keep
  // theirs), and drops any half-aggregated sync gradients. All-or-nothing: every snapshot
  // is validated before any is applied.
  // Errors: FAILED_PRECONDITION no variables created yet; NOT_FOUND unknown variable;
  //         INVALID_ARGUMENT a repeated variable or slot name, a value or slot whose shape
  //         differs from the variable's, a slot the optimizer does not keep, a negative
  //         version or iterations, a value or slot holding a NaN or an infinity.
  absl::Status RestoreState(std::vector<Snapshot> snapshots);

  // RestoreState for a source that writes straight into the variables, so that no second
  // copy of any variable exists at any moment (a ps restoring shards that fill most of its
  // memory; CheckpointShards). Every name, version, iterations and slot name is checked
  // against the store first, and nothing changes if one fails; then each variable in turn,
  // under its lock, takes its version and iterations, drops any half-aggregated sync
  // gradients, and `fill` writes its value and the slots named, in that order, into
  // `targets` (each of the variable's shape). Not all-or-nothing past the checks: the
  // caller verifies its source first (every checksum, every value finite), so that `fill`
  // fails only when the source changed since; the variables before it then keep their
  // new state, and the error (fill's code) says the restore is partial.
  // Errors: RestoreState's, but for what `fill` writes; `fill`'s, after "restore stopped
  //         part-way (N of M variables restored): ".
  struct InPlaceRestore {
    std::string name;
    int64_t version = 0;
    int64_t iterations = 0;
    std::vector<std::string> slots;
    // targets[0] is the value, targets[1 + k] slot k.
    std::function<absl::Status(absl::Span<const absl::Span<float>> targets)> fill;
  };
  absl::Status RestoreInPlace(const std::vector<InPlaceRestore>& restores);

  // The shape of variable `name` (it never changes once created).
  // Errors: NOT_FOUND an unknown name.
  absl::StatusOr<std::vector<int64_t>> ShapeOf(const std::string& name) const;

  std::vector<VariableInfo> List() const;
  int64_t num_pushes() const;
  int64_t num_pulls() const;
  // Sync mode: gradients dropped because they were computed at an older version.
  int64_t stale_gradients() const;
  // Pushes whose consistency wait ended at timeout_ms rather than when the slower
  // workers caught up (bounded staleness) or the aggregate filled (sync): a straggler or
  // a lost worker shows here.
  int64_t consistency_timeouts() const;
  // Pushes that had to wait for the consistency mode at all (bounded staleness: ahead of
  // a slower worker; sync: an aggregate not yet full), whether or not it timed out.
  int64_t consistency_waits() const;
  // Pushes (and CreateVariables / RestoreState calls) refused for a NaN or an infinity,
  // and pushes dropped for one under NONFINITE_SKIP.
  int64_t nonfinite_refused() const { return nonfinite_refused_.load(); }
  // (Sync mode: also gradients kept out of an aggregate, and aggregates dropped, for
  // overflowing a float.)
  int64_t nonfinite_skipped() const;
  // Pushes answered without applying because their request id had been applied.
  int64_t duplicate_pushes() const { return duplicate_pushes_.load(); }
  // Sync mode, per variable: updates of exactly replicas_to_aggregate gradients, of
  // fewer, and the gradients they averaged.
  int64_t sync_full_updates() const;
  int64_t sync_partial_updates() const;
  int64_t sync_aggregated_gradients() const;
  // Bounded staleness: the largest lead (in steps, over the slowest live worker of the
  // same epoch) any push was applied with.
  int64_t max_staleness_applied() const;
  // Async and bounded staleness: the dense pushes applied that carried the versions their
  // gradients were computed at (PushContext.versions, one per gradient; the versions are
  // information only there), the sum of their lags and the largest lag. A push's lag is
  // the largest, over its variables, of the version when it was applied minus the version
  // it was computed at: 0 for a worker that pulls before each push, 1 for one that
  // overlaps its exchange with the next step (PsTrainer::SetOverlap) and pushes alone.
  // A version pushed that is negative or ahead of the variable's is not counted.
  int64_t push_lag_pushes() const { return push_lag_pushes_.load(); }
  int64_t push_lag_sum() const { return push_lag_sum_.load(); }
  int64_t push_lag_max() const { return push_lag_max_.load(); }
  // Pushes so far by the name each push carries, with the (epoch, step) of its latest;
  // after 1024 names, further ones are counted together as "(other workers)".
  struct WorkerPushes {
    std::string worker;
    int64_t pushes = 0;
    int32_t epoch = 0;
    int64_t step = 0;
  };
  std::vector<WorkerPushes> pushes_by_worker() const ABSL_LOCKS_EXCLUDED(pushers_mu_);
  std::string optimizer_name() const;
  // The optimizer settings the first CreateVariables set (empty before).
  OptimizerConfig optimizer_config() const;
  ConsistencyMode consistency_mode() const;
  // True once the first CreateVariables set the async mode: a push then never waits for
  // another worker's (it may still wait, briefly, for a retry of itself that another call
  // is applying). False before, when a push's mode is not known yet.
  bool pushes_never_wait() const;

 private:
  struct Variable {
    explicit Variable(Tensor initial)
        : num_elements(initial.num_elements()),
          shape(initial.shape()),
          value(std::move(initial)) {}
    // Never change (a restore keeps the shape), so they are read without the lock.
    const int64_t num_elements;
    const std::vector<int64_t> shape;
    mutable absl::Mutex mu;
    Tensor value ABSL_GUARDED_BY(mu);
    // Its update (the optimizer, or a moving-average rule): set at creation, never changed.
    const Optimizer* optimizer = nullptr;  // Not owned (update_rules_).
    std::unique_ptr<OptimizerState> state ABSL_GUARDED_BY(mu);
    // A dense update is computed into these (Optimizer::ApplyInto, checked on the way)
    // and swapped with value and state when every variable of the push stays finite, so
    // a push runs its update's arithmetic once and a refused one changes nothing. What
    // they hold between updates means nothing. Made by the first dense update (a
    // variable only ever pushed by rows never has them); the memory budget counts them.
    Tensor next_value ABSL_GUARDED_BY(mu);
    std::unique_ptr<OptimizerState> next_state ABSL_GUARDED_BY(mu);
    int64_t version ABSL_GUARDED_BY(mu) = 0;
    // Sync mode: the gradients computed at `version` not yet applied.
    SyncAggregator::Pending pending ABSL_GUARDED_BY(mu);
  };

  // A variable as the sync aggregator sees it: its lock, version and aggregate, its dense
  // update (computed aside and swapped in, as a push's) and its row update (checked, then
  // applied in place, as a row push's).
  class SyncView : public SyncAggregator::Variable {
   public:
    explicit SyncView(VariableStore::Variable* v) : v_(v) {}
    absl::Mutex& mu() override { return v_->mu; }
    int64_t version() override;
    SyncAggregator::Pending& pending() override;
    bool ApplyMean(absl::Span<const float> mean) override;
    bool ApplyRowsMean(absl::Span<const int64_t> rows,
                       absl::Span<const float> row_means) override;
    void BumpVersion() override;

   private:
    VariableStore::Variable* v_;  // Not owned.
  };

  enum class Mode { kAsync, kBoundedStaleness, kSync };

  // Records an applied push's lag (push_lag_*); lag < 0: it carried no versions to count.
  void CountPushLag(int64_t lag);
  // Records an applied push under its worker's name, for pushes_by_worker().
  void CountPush(const PushContext& context) ABSL_LOCKS_EXCLUDED(pushers_mu_);

  absl::StatusOr<Variable*> Find(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  // What a restore names for one variable, checked before anything changes.
  struct RestoreTarget {
    std::string name;
    int64_t version = 0;
    int64_t iterations = 0;
    std::vector<std::string> slots;
  };
  // The variables `targets` name, in order, once each, with counts >= 0 and slots their
  // optimizer keeps. Errors: as RestoreState's for those.
  absl::StatusOr<std::vector<Variable*>> FindRestoreTargets(
      absl::Span<const RestoreTarget> targets) const ABSL_LOCKS_EXCLUDED(mu_);

  // A variable CreateVariables is asked for, as its checks see it (its value may not be
  // drawn yet).
  struct RequestedVariable {
    std::string name;
    std::vector<int64_t> shape;
  };

  // The checks CreateVariables makes under mu_ before it changes anything: `optimizer`
  // and `consistency` (normalized) agree with those set, if any; a variable that exists
  // has the requested shape; everything fits the memory budget. Sets `*new_rules` to the
  // optimizer's rules when none are set yet.
  // Errors: INVALID_ARGUMENT another optimizer or consistency; ALREADY_EXISTS another
  //         shape; RESOURCE_EXHAUSTED (CheckVariablesFit).
  absl::Status CheckCreate(const std::vector<RequestedVariable>& requested,
                           const OptimizerConfig& optimizer, const ConsistencyConfig& consistency,
                           std::unique_ptr<UpdateRules>* new_rules) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Whether the variables held and the new ones among `requested`, with `optimizer`'s
  // slots (and sync's aggregates), fit the memory budget (common/memory_budget.h).
  // Errors: RESOURCE_EXHAUSTED naming the largest new variable.
  absl::Status CheckVariablesFit(const std::vector<RequestedVariable>& requested,
                                 const Optimizer& optimizer, bool sync) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // What a push runs under, read once: the job's optimizer (whose non-finite policy it
  // follows) and the consistency mode with its gate or aggregator.
  struct PushSettings {
    const Optimizer* optimizer = nullptr;  // Not owned (update_rules_).
    Mode mode = Mode::kAsync;
    StalenessGate* gate = nullptr;         // Not owned (gate_); bounded staleness only.
    SyncAggregator* aggregator = nullptr;  // Not owned (aggregator_); sync only.
  };
  // Errors: FAILED_PRECONDITION no variables created yet.
  absl::StatusOr<PushSettings> SettingsForPush() const ABSL_LOCKS_EXCLUDED(mu_);

  // Holding the locks of every variable in `found` (taken in address order): runs
  // prepare(i, *found[i]) for each i in turn, which computes (or only checks) the update
  // without changing the variable and says whether it stays finite; when every one does,
  // runs commit(i, *found[i]) and bumps the version of each; else changes nothing.
  // Returns the index of the first variable whose update would not stay finite, or -1
  // when all were applied. So a push is checked once and applied whole or not at all,
  // and no other push changes a variable in between. The callbacks run with
  // found[i]->mu held (they assert it for the thread-safety analysis, which cannot
  // follow a set of locks).
  template <typename PrepareFn, typename CommitFn>
  int64_t ApplyAllOrNone(absl::Span<Variable* const> found, PrepareFn prepare,
                         CommitFn commit) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // The dense update of v by `gradient` computed into v.next_value and v.next_state
  // (made on first use); whether every value and slot of it is finite. v is unchanged.
  static bool PrepareDenseUpdate(Variable& v, absl::Span<const float> gradient)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(v.mu);
  // Makes the update PrepareDenseUpdate computed v's value and state (a swap: no copy).
  static void CommitDenseUpdate(Variable& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(v.mu);

  // A push's gradients as the checks every push makes found them, before anything
  // changed: the variables and their shapes, in the gradients' order.
  struct CheckedPush {
    std::vector<Variable*> variables;
    std::vector<std::vector<int64_t>> shapes;
    // A value was not finite and the optimizer's policy is NONFINITE_SKIP: the push is
    // answered OK and nothing is applied.
    bool dropped = false;
  };
  // The checks Push and PushRows share, in this order: each variable named once, each
  // known, each gradient's shape fits its variable (CheckGradientShape, sparse_rows's
  // rules for row gradients: no rows only in sync mode), every value finite (else
  // refused, or dropped under the optimizer's NONFINITE_SKIP: DropNonFinitePush).
  // Errors: NOT_FOUND an unknown variable; INVALID_ARGUMENT a name given twice, a shape
  //         that does not fit, a non-finite value.
  template <typename Gradient>
  absl::StatusOr<CheckedPush> CheckPush(absl::Span<const Gradient> gradients,
                                        const PushSettings& settings);
  // Sync mode: a push names the version of each of its `gradients`.
  // Errors: INVALID_ARGUMENT context.versions not aligned with the gradients.
  static absl::Status CheckSyncVersions(const PushContext& context, size_t gradients);
  // The aggregator's view of each of `views` (which must outlive it).
  static std::vector<SyncAggregator::Variable*> AsSyncVariables(std::vector<SyncView>& views);

  // Push without the request-id bookkeeping.
  absl::Status PushOnce(absl::Span<const NamedTensor> gradients, const PushContext& context);
  // PushRows without the request-id bookkeeping.
  absl::Status PushRowsOnce(absl::Span<const SparseGradient> gradients, const PushContext& context);
  // Runs `push` once per request id (context.request_id 0: always), as Push documents.
  template <typename PushFn>
  absl::Status OncePerRequest(const PushContext& context, PushFn push);

  // Refused values: counts them and logs the first once.
  absl::Status RefuseNonFinite(absl::Status problem);
  // A push holding a non-finite value, or whose update overflows: refused (the problem,
  // counted by RefuseNonFinite) or, under NONFINITE_SKIP, dropped (OK, counted).
  absl::Status DropNonFinitePush(absl::Status problem, const Optimizer& optimizer);
  static absl::Status UpdateOverflows(absl::string_view name);

  // State below is protected by mu_. Variables are never removed, so a Variable* found
  // under mu_ stays valid after mu_ is released.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Variable>> variables_ ABSL_GUARDED_BY(mu_);
  // The optimizer and the moving-average rules of non-trainable variables; set by the
  // first CreateVariables, never replaced (Variable::optimizer points into it).
  std::unique_ptr<UpdateRules> update_rules_ ABSL_GUARDED_BY(mu_);
  OptimizerConfig optimizer_config_ ABSL_GUARDED_BY(mu_);
  bool consistency_set_ ABSL_GUARDED_BY(mu_) = false;
  ConsistencyConfig consistency_config_ ABSL_GUARDED_BY(mu_);
  Mode mode_ ABSL_GUARDED_BY(mu_) = Mode::kAsync;
  // The mode's own state, made with it by the first CreateVariables and never replaced
  // (a push keeps the pointer after mu_ is released). Each has a lock of its own, so
  // neither waits on mu_.
  std::unique_ptr<StalenessGate> gate_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SyncAggregator> aggregator_ ABSL_GUARDED_BY(mu_);

  // Every pusher's count and latest position (any mode), by the name its pushes carry.
  // A push takes pushers_mu_ shared, only to find its entry, and bumps atomics; only a
  // new name takes it exclusively. Entries are never removed (pointers stay valid), and
  // past kMaxTrackedPushers names the rest share one entry, so a peer inventing a name per
  // push cannot grow the map without bound.
  struct PusherCounts {
    std::atomic<int64_t> pushes{0};
    std::atomic<int32_t> epoch{0};
    std::atomic<int64_t> step{0};
  };
  static constexpr size_t kMaxTrackedPushers = 1024;
  mutable absl::Mutex pushers_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<PusherCounts>> pushers_
      ABSL_GUARDED_BY(pushers_mu_);

  // Counters for status pages; atomics so that counting never serialises requests.
  std::atomic<int64_t> pushes_{0};
  mutable std::atomic<int64_t> pulls_{0};
  std::atomic<int64_t> nonfinite_refused_{0};
  std::atomic<int64_t> nonfinite_skipped_{0};
  std::atomic<int64_t> duplicate_pushes_{0};
  std::atomic<int64_t> push_lag_pushes_{0};
  std::atomic<int64_t> push_lag_sum_{0};
  std::atomic<int64_t> push_lag_max_{0};
  std::atomic<bool> logged_nonfinite_{false};

  RequestLog requests_;
};

// The store's variables, versions and counters as the GetStatus RPC reports them.
PsStatusResponse DescribeStore(const VariableStore& store);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_VARIABLE_STORE_H_
