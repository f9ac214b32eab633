#ifndef PSTRAIN_PS_SERVER_VARIABLE_STORE_H_
#define PSTRAIN_PS_SERVER_VARIABLE_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model/optimizer.h"
#include "common/tensor.h"
#include "ps_server/consistency.h"
#include "ps_server/variable_snapshot.h"
#include "proto/ps.pb.h"

namespace pstrain {

// The variables one ps task owns, with the optimizer that updates them. Knows nothing
// of gRPC (ps_server/rpc/ adapts it).
//
// Thread-safe. Each variable has its own lock, so pushes to different variables proceed
// in parallel and a pull never sees a half-applied update; the map itself is guarded by
// a reader/writer lock taken only briefly to find a variable.
//
// Consistency (ConsistencyConfig, set by the first CreateVariables): "async" applies every
// push at once. "bounded_staleness" holds a push whose (epoch, step) is more than
// `staleness` steps ahead of the slowest other worker that pushed in the same epoch, until
// that worker catches up or timeout_ms passes; a worker that moved on to a later epoch no
// longer holds anyone back. "sync" accumulates, per variable, the gradients computed at
// its current version and applies their mean once replicas_to_aggregate have arrived,
// bumping the version; a gradient of an older version is dropped (stale_gradients()). A
// sync push returns once the version of every variable it contributed to advanced, or
// after timeout_ms, when the partial mean is applied, so a straggler never hangs the job.
// Staleness state sits under its own small mutex and sync state under each variable's
// lock, so async pushes never take a store-wide lock.
//
// Copy-on-write: a variable's committed value is an immutable shared buffer. Every
// mutation (Push, a streamed push, a sync aggregate, RestoreState) first takes the
// variable's writer lock, so writers of one variable serialise; a reader (Pull,
// ReadState) takes only the variable's state lock, briefly, and sees a whole update or
// none. A streamed push computes the new value and slots into fresh buffers while it
// holds the writer lock and swaps them in at Commit.
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

  // Creates variables with initial values; the first call also sets the optimizer.
  // All-or-nothing. Re-creating a variable with the same shape keeps its current value
  // (a restarted chief repeats the call).
  // Errors: INVALID_ARGUMENT empty or duplicate name, unknown optimizer, or an optimizer
  //         that differs from the one already set; ALREADY_EXISTS same name, other shape.
  // The first call also sets the consistency mode; a later call must repeat it.
  // Errors: INVALID_ARGUMENT also an invalid consistency config, or one that differs from
  //         the one already set.
  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency = ConsistencyConfig());

  // Current values of `names`, in order; `versions` (may be null) gets each variable's
  // count of applied updates. Errors: NOT_FOUND an unknown name.
  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names,
                                           std::vector<int64_t>* versions) const;

  // Applies every gradient with the optimizer. Every gradient is validated before any is
  // applied, so a bad request changes nothing.
  // `context` says who pushes and at which step and versions (see the class comment);
  // in sync or bounded_staleness mode the call may block up to timeout_ms.
  // Errors: NOT_FOUND unknown variable; INVALID_ARGUMENT a shape differs from the
  //         variable's or a name repeats, or (sync) context.versions is not aligned with
  //         the gradients; FAILED_PRECONDITION no variables created yet.
  absl::Status Push(absl::Span<const NamedTensor> gradients,
                    const PushContext& context = PushContext());

  // The state of `names` in order (empty = every variable, by name), each variable read
  // under its own lock, so each one is consistent with itself (value, slots and
  // iterations of one update) though not with the others.
  // Errors: NOT_FOUND an unknown name.
  absl::StatusOr<std::vector<Snapshot>> ReadState(absl::Span<const std::string> names) const;

  // Replaces each variable's value, version, iterations and the slots given (others keep
  // theirs), and drops any half-aggregated sync gradients. All-or-nothing: every snapshot
  // is validated before any is applied.
  // Errors: FAILED_PRECONDITION no variables created yet; NOT_FOUND unknown variable;
  //         INVALID_ARGUMENT a repeated variable or slot name, a value or slot whose shape
  //         differs from the variable's, a slot the optimizer does not keep, a negative
  //         version or iterations.
  absl::Status RestoreState(std::vector<Snapshot> snapshots);

  // A push whose gradients arrive piece by piece (the PushPullStream RPC); see below.
  class StreamedPush;

  // Starts a push of gradients for `names` (shapes `shapes`, in the same order) that is
  // applied piece by piece as the gradient bytes arrive, each piece's new values handed
  // back at once, and committed whole by StreamedPush::Commit. Async and
  // bounded_staleness only; bounded_staleness waits here for slower workers, as Push does.
  // Errors: FAILED_PRECONDITION no variables created yet, or sync mode (which aggregates
  //         whole gradients: use Push); NOT_FOUND unknown variable; INVALID_ARGUMENT a
  //         shape differs from the variable's or a name repeats.
  absl::StatusOr<std::unique_ptr<StreamedPush>> BeginStreamedPush(
      std::vector<std::string> names, const std::vector<std::vector<int64_t>>& shapes,
      const PushContext& context);

  std::vector<VariableInfo> List() const;
  int64_t num_pushes() const;
  int64_t num_pulls() const;
  // Sync mode: gradients dropped because they were computed at an older version.
  int64_t stale_gradients() const;
  std::string optimizer_name() const;
  // The optimizer settings the first CreateVariables set (empty before).
  OptimizerConfig optimizer_config() const;
  std::string consistency_mode() const;

 private:
  struct Variable {
    explicit Variable(Tensor initial) : value(std::make_shared<Tensor>(std::move(initial))) {}
    // The writer lock: every mutation holds it from reading the old state to committing
    // the new one, so writers of this variable never interleave. Taken before `mu`.
    // A streamed push may hold it across several calls (StreamedPush).
    absl::Mutex push_mu ABSL_ACQUIRED_BEFORE(mu);
    // The state lock: readers take only this one, writers take it (inside push_mu) to
    // change what readers see.
    mutable absl::Mutex mu;
    // The committed value. Shared with readers and with reply slices that may outlive a
    // request, so it is written in place only while no one else holds it (use_count 1,
    // checked under mu, where new references are made); otherwise replaced.
    std::shared_ptr<Tensor> value ABSL_GUARDED_BY(mu);
    // Slots are written only under push_mu and mu, so a writer holding push_mu may read
    // them without mu.
    std::unique_ptr<OptimizerState> state ABSL_GUARDED_BY(mu);
    int64_t version ABSL_GUARDED_BY(mu) = 0;
    // Sync mode: sum and count of the gradients computed at `version` not yet applied.
    std::vector<float> pending_sum ABSL_GUARDED_BY(mu);
    int pending_count ABSL_GUARDED_BY(mu) = 0;
  };

  enum class Mode { kAsync, kBoundedStaleness, kSync };
  // The consistency config in the form the push path reads (no strings).
  struct Rules {
    Mode mode = Mode::kAsync;
    int64_t staleness = 0;
    int replicas_to_aggregate = 1;
    absl::Duration timeout;
  };

  struct WorkerProgress {
    int32_t epoch = 0;
    int64_t step = 0;
    absl::Time last_push;
  };

  // Bounded staleness: records the pusher's progress and waits while it is more than
  // rules.staleness steps ahead of the slowest other live worker in its epoch, at most
  // rules.timeout. A worker that has not pushed for rules.timeout is not live (dead, or
  // done with its share of the epoch): it holds the others back for one timeout, not
  // for every push after.
  void WaitForSlowerWorkers(const PushContext& context, const Rules& rules)
      ABSL_LOCKS_EXCLUDED(progress_mu_);

  // Sync: adds each gradient to its variable's aggregate (dropping stale ones), then waits
  // until each aggregate it joined was applied, applying a partial one at the deadline.
  void PushSync(absl::Span<Variable* const> found, absl::Span<const NamedTensor> gradients,
                absl::Span<const int64_t> versions, const Optimizer* optimizer,
                const Rules& rules, int replicas_to_aggregate);

  // Sync: records the pusher's push and returns how many gradients make an aggregate
  // now: rules.replicas_to_aggregate less one for each worker that pushed before but not
  // for rules.timeout (killed, or done with its share), at least 1. A dead worker then
  // costs one timeout instead of one per step; it counts again once it pushes again.
  int LiveReplicasToAggregate(const PushContext& context, const Rules& rules)
      ABSL_LOCKS_EXCLUDED(progress_mu_);

  // Applies the mean of v's pending gradients and bumps its version.
  static void ApplyPending(Variable* v, const Optimizer* optimizer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(v->push_mu, v->mu);

  // Applies `gradient` to v's committed value in place, or to a copy when the value is
  // shared (a reader or a reply still holds it), and bumps its version.
  static void ApplyToValue(Variable* v, absl::Span<const float> gradient,
                           const Optimizer* optimizer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(v->push_mu, v->mu);

  absl::StatusOr<Variable*> Find(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);

  // State below is protected by mu_. Variables are never removed, so a Variable* found
  // under mu_ stays valid after mu_ is released.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Variable>> variables_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  OptimizerConfig optimizer_config_ ABSL_GUARDED_BY(mu_);
  bool consistency_set_ ABSL_GUARDED_BY(mu_) = false;
  ConsistencyConfig consistency_config_ ABSL_GUARDED_BY(mu_);
  Rules rules_ ABSL_GUARDED_BY(mu_);

  // Bounded staleness: each worker's latest pushed (epoch, step). A separate small lock,
  // so that neither the map lock nor async pushes ever wait on it.
  absl::Mutex progress_mu_;
  absl::flat_hash_map<std::string, WorkerProgress> progress_ ABSL_GUARDED_BY(progress_mu_);

  // Counters for status pages; atomics so that counting never serialises requests.
  std::atomic<int64_t> pushes_{0};
  mutable std::atomic<int64_t> pulls_{0};
  std::atomic<int64_t> stale_{0};
  // A timed-out wait is logged once per store, not once per push.
  std::atomic<bool> logged_staleness_timeout_{false};
  std::atomic<bool> logged_sync_shrink_{false};
  std::atomic<bool> logged_sync_timeout_{false};
};

// One push applied piece by piece (VariableStore::BeginStreamedPush). The caller first
// takes the writer locks of all the push's variables (TryLock, or Lock), then hands each
// gradient's elements over in order (ApplyChunk), each call returning that range's new
// values, then Commits. New values and slots go to fresh buffers: until Commit, readers
// see the old state, and destroying the object without Commit changes nothing.
//
// Thread-compatible: one thread at a time (the locks it holds are released by whichever
// thread commits or destroys it). While it holds the locks, every other writer of those
// variables waits, so the caller should lock only when it has gradient bytes to apply.
class VariableStore::StreamedPush {
 public:
  // New values of a range, valid while `owner` lives; whoever sends them keeps `owner`.
  struct Values {
    absl::Span<const float> values;
    std::shared_ptr<const void> owner;
  };

  StreamedPush(const StreamedPush&) = delete;
  StreamedPush& operator=(const StreamedPush&) = delete;
  // Without Commit: releases the writer locks; nothing changed.
  ~StreamedPush();

  // Takes the writer lock of every variable of the push, all or none, without waiting.
  // Locks are taken in one global order (by address), so pushes of overlapping variable
  // sets never deadlock. True once they are held (also when already held).
  bool TryLock();
  // As TryLock, waiting for the locks.
  void Lock();
  bool locked() const { return locked_; }

  // After a lock: each variable's version once this push is committed, in push order.
  std::vector<int64_t> versions() const;

  // Applies gradient elements [first, first + gradient.size()) of tensor `tensor` (an
  // index into the names given to BeginStreamedPush) and returns their new values.
  // Elements of a tensor come in order, each once.
  // Errors: FAILED_PRECONDITION locks not held, or already committed; INVALID_ARGUMENT an
  //         unknown tensor, `first` other than the elements applied so far, or past the end.
  absl::StatusOr<Values> ApplyChunk(int tensor, int64_t first,
                                    absl::Span<const float> gradient);

  // Makes every variable's new value, slots, iterations and version visible at once (per
  // variable), then releases the locks.
  // Errors: FAILED_PRECONDITION locks not held or already committed; INVALID_ARGUMENT a
  //         tensor that did not receive all its elements (nothing changes then).
  absl::Status Commit();

 private:
  friend class VariableStore;
  // A variable's new value while the push fills it, shared with the reply slices that
  // carry it. Its storage is reserved whole at the first chunk and never moves; each
  // chunk's range is sized just before it is written (cache-hot) rather than the whole
  // tensor zero-filled up front. Commit moves the storage into the committed Tensor and
  // keeps that here, so slices still in gRPC's hands keep it alive.
  struct NewValue {
    std::vector<float> data;
    std::shared_ptr<const Tensor> committed;
  };
  struct Target {
    std::string name;
    Variable* variable = nullptr;  // Not owned.
    int64_t elements = 0;
    int64_t applied = 0;
    // Read when the locks are taken; stable while they are held.
    std::shared_ptr<const Tensor> old_value;
    std::vector<const float*> old_slots;
    int64_t iterations = 0;
    int64_t version = 0;
    // Reserved at the first chunk, grown chunk by chunk like new_value.
    std::shared_ptr<NewValue> new_value;
    std::vector<std::vector<float>> new_slots;
  };

  StreamedPush(VariableStore* store, const Optimizer* optimizer, std::vector<Target> targets);
  // Reads each target's committed state; called once the locks are held.
  void OnLocked();
  void Unlock();
  // An optimizer state of `n` elements for one chunk's update (slots copied in and out).
  OptimizerState* ChunkState(int64_t n);

  VariableStore* store_;         // Not owned.
  const Optimizer* optimizer_;   // Not owned; the store's, which never changes once set.
  std::vector<Target> targets_;
  std::vector<Variable*> lock_order_;
  bool locked_ = false;
  bool committed_ = false;
  std::unique_ptr<OptimizerState> chunk_state_;
};

// The store's variables, versions and counters as the GetStatus RPC reports them.
PsStatusResponse DescribeStore(const VariableStore& store);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_VARIABLE_STORE_H_
