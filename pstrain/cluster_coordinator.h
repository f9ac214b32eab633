#ifndef PSTRAIN_PSTRAIN_CLUSTER_COORDINATOR_H_
#define PSTRAIN_PSTRAIN_CLUSTER_COORDINATOR_H_

// tf.distribute.coordinator.ClusterCoordinator for the parameter_server strategy: the
// chief schedules functions, each runs on whichever worker is free, and their values come
// back as RemoteValues.
//
// How the worker side runs a C++ function: every task of the job (chief, workers, ps)
// runs the same program. Each process creates the strategy, the model and the
// coordinator, then makes the same per-worker iterators and registers the same functions
// in the same order; a worker then calls Serve() and runs what the chief schedules, by
// index (its name is checked), on its own instance of the iterator, until the chief is
// done. A function that the chief cannot get a worker to answer for (a worker killed,
// or past function_timeout) runs again on another worker, as TensorFlow's coordinator
// does (at least once); the first function that fails makes Join() return its error and
// cancels the functions still queued. A function that fails on a ps (its error UNAVAILABLE,
// DEADLINE_EXCEEDED, CANCELLED, ABORTED, NOT_FOUND or FAILED_PRECONDITION) is reported by
// its worker as ABORTED "a ps failed: ..." (distribute/failure.h) and fails Join() naming
// the ps; a function's own errors should use other codes. The scheduler is
// distribute/closure_scheduler.h.
//
//   auto coordinator = ClusterCoordinator::Create(strategy.get());
//   PerWorkerIterator it = coordinator->CreatePerWorkerIterator(dataset_fn);
//   RemoteFunction<StepResult> train = coordinator->Register("train", train_fn);
//   if (strategy->task().type == Role::kWorker) return coordinator->Serve();
//   RemoteValue<StepResult> v = coordinator->Schedule(train, it);
//   coordinator->Join();  v.Fetch();
//
// Thread-safety: one thread registers, schedules and joins; RemoteValue::Fetch may be
// called from any thread.

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "distribute/membership.h"
#include "pstrain/replica.h"
#include "pstrain/strategy.h"
#include "pstrain/value_codec.h"

namespace pstrain::distribute {

namespace internal {
class FunctionClosure;
class RoleTask;
}  // namespace internal

// The result of a scheduled function (TensorFlow's RemoteValue).
template <typename T>
class RemoteValue {
 public:
  // Waits for the function to finish: its value, or its error (CANCELLED when an earlier
  // function failed and the queue was cancelled; UNAVAILABLE when no worker was left).
  absl::StatusOr<T> Fetch() const;
  // Whether it has finished (Fetch would not wait).
  bool done() const;

 private:
  friend class ClusterCoordinator;
  explicit RemoteValue(std::shared_ptr<internal::FunctionClosure> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::FunctionClosure> state_;
};

// A function registered on every task, to schedule by this handle.
template <typename T>
struct RemoteFunction {
  int index = -1;
  std::string name;
};

// An iterator every worker makes for itself (TensorFlow's PerWorkerDataset iterator).
struct PerWorkerIterator {
  int index = -1;
};

class ClusterCoordinator {
 public:
  // `strategy` (not owned, must outlive it) is a parameter_server strategy, on any task.
  // Errors: INVALID_ARGUMENT another strategy.
  static absl::StatusOr<std::unique_ptr<ClusterCoordinator>> Create(Strategy* strategy);

  // coordinator.create_per_worker_dataset(dataset_fn) and iter() of it: each worker calls
  // `make_iterator(worker_index)` now, for an iterator of its own that the functions
  // scheduled with this handle read (the chief and ps never call it).
  // Errors (workers): what make_iterator returns.
  using IteratorFactory =
      std::function<absl::StatusOr<std::unique_ptr<DistributedIterator>>(int worker_index)>;
  absl::StatusOr<PerWorkerIterator> CreatePerWorkerIterator(const IteratorFactory& make_iterator);

  // Registers `fn`, a callable (DistributedIterator&) -> absl::StatusOr<T> where T has a
  // ValueCodec (pstrain/value_codec.h), under `name`. Every task registers the same
  // functions in the same order; the workers run them, the chief schedules them.
  template <typename Fn>
  auto Register(const std::string& name, Fn fn) -> RemoteFunction<
      typename internal::StatusOrValue<std::invoke_result_t<Fn&, DistributedIterator&>>::type> {
    using T = typename internal::StatusOrValue<
        std::invoke_result_t<Fn&, DistributedIterator&>>::type;
    RemoteFunction<T> handle;
    handle.name = name;
    handle.index = RegisterFunction(
        name, [fn = std::move(fn)](DistributedIterator& it) mutable
        -> absl::StatusOr<std::vector<double>> {
          absl::StatusOr<T> value = fn(it);
          if (!value.ok()) return value.status();
          std::vector<double> flat;
          ValueCodec<T>::Flatten(*value, &flat);
          return flat;
        });
    return handle;
  }

  // Chief: coordinator.schedule(fn, args=(iterator,)): queues `fn` to run on the next free
  // worker with that worker's instance of `iterator`, and returns at once. On another
  // task the value fails at once with FAILED_PRECONDITION.
  template <typename T>
  RemoteValue<T> Schedule(const RemoteFunction<T>& fn, const PerWorkerIterator& iterator) {
    return RemoteValue<T>(ScheduleFunction(fn.index, fn.name, iterator.index));
  }

  // Chief: coordinator.join(): waits until every scheduled function has finished. Returns
  // the first function error since the previous Join (the later queued functions were
  // cancelled), else OK. Errors: FAILED_PRECONDITION on another task.
  absl::Status Join();

  // Worker: runs the functions the chief schedules until it says the job is done (OK) or
  // has not answered for chief_timeout (UNAVAILABLE naming it). Errors:
  // FAILED_PRECONDITION on another task.
  absl::Status Serve();

  // Chief: how many functions each worker ran (to success or to its own error).
  std::vector<int64_t> functions_run_per_worker() const;

  // Chief: every ps and worker and whether it is alive, lost or back (times_back), by the
  // rules the chief daemon's membership keeps too (distribute/membership.h): a task is
  // alive once it answers the chief, lost when a function could not reach it, and back
  // when it answers again. Empty on another task.
  std::vector<MemberStatus> members() const;

 private:
  template <typename T>
  friend class RemoteValue;
  explicit ClusterCoordinator(internal::RoleTask* task) : task_(task) {}
  int RegisterFunction(const std::string& name,
                       std::function<absl::StatusOr<std::vector<double>>(DistributedIterator&)> fn);
  std::shared_ptr<internal::FunctionClosure> ScheduleFunction(int index, const std::string& name,
                                                           int iterator);
  static absl::StatusOr<std::vector<double>> WaitFor(const internal::FunctionClosure& state);
  static bool IsDone(const internal::FunctionClosure& state);

  internal::RoleTask* const task_;  // Not owned: the strategy's.
};

template <typename T>
absl::StatusOr<T> RemoteValue<T>::Fetch() const {
  absl::StatusOr<std::vector<double>> values = ClusterCoordinator::WaitFor(*state_);
  if (!values.ok()) return values.status();
  return ValueCodec<T>::Unflatten(*values);
}

template <typename T>
bool RemoteValue<T>::done() const {
  return ClusterCoordinator::IsDone(*state_);
}

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_CLUSTER_COORDINATOR_H_
