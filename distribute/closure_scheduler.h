#ifndef PSTRAIN_DISTRIBUTE_CLOSURE_SCHEDULER_H_
#define PSTRAIN_DISTRIBUTE_CLOSURE_SCHEDULER_H_

// The chief's scheduler of work on workers, as TensorFlow's ClusterCoordinator schedules
// closures: closures are queued, and one thread per worker takes the next one whenever
// its worker is free, so faster workers run more. It has two users: the custom loop
// (pstrain/cluster_coordinator.h: a closure runs one registered function over
// RunFunction) and the chief's parameter-server training (chief/coordinator.h: a closure
// runs one chunk of steps over RunSteps; an epoch segment is a Join).
//
// What a failed closure means is decided once, by ClassifyFailure (distribute/failure.h):
//  - kWorkerLost: the worker is lost. The closure goes back to the front of the queue and
//    runs on another worker (at least once, as in TensorFlow); the lost worker takes
//    closures again once its Ready() answers true.
//  - kPsFailed: no new closure is dispatched; once those in flight are back,
//    Options::recover_ps is called once (however many workers reported the failure), the
//    failed closures run again, first, and dispatching resumes. Without a recover_ps, or
//    when it fails, the closure's (or recover_ps's) error is Join's.
//  - kFunctionError: the first one is what Join returns; the closures still queued are
//    cancelled.
// When no worker has been usable for the recovery timeout while closures wait (the startup
// timeout before any was), the queued closures fail UNAVAILABLE naming the workers.
// Knows nothing of gRPC or of what a closure does: workers are ScheduledWorkers, closures
// run against a worker index.
//
// Thread-safety: every method may be called from any thread, Schedule from inside a
// closure's Run too (a closure that queues its successor).

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain::distribute {

// A worker as the scheduler sees it.
class ScheduledWorker {
 public:
  virtual ~ScheduledWorker() = default;
  // "worker task 1 (host:port)": logs and errors name it.
  virtual std::string name() const = 0;
  // Whether it takes closures; asked before its first closure and, once it was lost,
  // every poll_interval until it answers true. An error is kept as the reason it is not
  // usable (the starvation error names it).
  virtual absl::StatusOr<bool> Ready() = 0;
};

// One piece of work for whichever worker is free.
class Closure {
 public:
  virtual ~Closure() = default;

  // What it is, for logs: `function "train" (closure 3)`.
  virtual std::string Describe() const = 0;
  // Runs it on worker `worker` (an index into the scheduler's workers) and blocks until
  // it is done. Called on that worker's scheduler thread; again, on another worker, after
  // a kWorkerLost or kPsFailed outcome. Returns the outcome, sorted by ClassifyFailure; a
  // kFunctionError or kPsFailed status may become Join's, so it names the closure, the
  // worker and (kPsFailed) the ps.
  virtual absl::Status Run(int worker) = 0;
  // Called once, last: OK, its function error, or why it never ran to the end (CANCELLED
  // after an earlier error or when the scheduler stops, UNAVAILABLE no worker, the ps
  // recovery's error). Takes the status by value: the scheduler hands its copy over
  // instead of dropping it after the caller of Join may already hold it.
  virtual void Finish(absl::Status status) = 0;
  // The log's account of what happens to it when its worker is lost.
  virtual std::string WhenRequeued() const { return Describe() + " runs again on another worker"; }

  // Its number, in scheduling order from 0 (set by ClosureScheduler::Schedule).
  int64_t id() const { return id_; }

 private:
  friend class ClosureScheduler;
  int64_t id_ = -1;
};

struct ClosureSchedulerOptions {
  // How long the queued closures wait for a first worker to become ready.
  absl::Duration startup_timeout = absl::Seconds(60);
  // How long they wait, once every worker is lost, for one to come back.
  absl::Duration recovery_timeout = absl::Seconds(60);
  // How often a worker that is not ready is asked again.
  absl::Duration poll_interval = absl::Milliseconds(200);
  // Recovers the failed ps tasks (waits for them, restores what they lost) with no
  // closure in flight; its error ends the closures queued and is Join's. May be empty:
  // then a ps failure is an error like a function's. Called on a scheduler thread.
  std::function<absl::Status()> recover_ps;
  // Told of every lost worker (index, the status that lost it) before its closure is
  // queued again and before the worker is asked whether it is Ready. May be empty.
  // Called on that worker's scheduler thread, with no lock of the scheduler's held.
  std::function<void(int worker, const absl::Status& status)> on_worker_lost;
};

class ClosureScheduler {
 public:
  // `workers` are not owned and must outlive the scheduler.
  ClosureScheduler(std::vector<ScheduledWorker*> workers, ClosureSchedulerOptions options);
  // Cancels the queued closures (CANCELLED) and stops; a closure in flight (or a ps
  // recovery) finishes first.
  ~ClosureScheduler();
  ClosureScheduler(const ClosureScheduler&) = delete;
  ClosureScheduler& operator=(const ClosureScheduler&) = delete;

  // Queues `closure` (its id is set here) and returns at once. After the scheduler began
  // stopping, the closure is finished CANCELLED at once.
  void Schedule(std::shared_ptr<Closure> closure) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every scheduled closure (those scheduled meanwhile too) is done. Returns
  // the first error since the previous Join (and forgets it, so scheduling goes on), else
  // OK. Errors: a closure's kFunctionError status; a kPsFailed status without
  // recover_ps; recover_ps's error; UNAVAILABLE no worker was usable in time.
  absl::Status Join() ABSL_LOCKS_EXCLUDED(mu_);

  // Closures run (to success or to their own error) by each worker, in worker order.
  std::vector<int64_t> closures_run() const ABSL_LOCKS_EXCLUDED(mu_);
  // Times recover_ps was called.
  int64_t ps_recoveries() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct WorkerState {
    bool ready = false;
    bool ever_ready = false;
    absl::Time unusable_since;
    std::string last_error;
    int64_t closures_run = 0;
  };

  void WorkerLoop(int w);
  // Asks worker w whether it is ready; false after waiting poll_interval (or stopping).
  bool BecomeReady(int w) ABSL_LOCKS_EXCLUDED(mu_);
  // Sorts the outcome of `closure` on worker w and acts on it.
  void Complete(int w, std::shared_ptr<Closure> closure, absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finishes `closure` with `status`, makes it Join's error unless there is one, and
  // cancels the queue.
  void Fail(const std::shared_ptr<Closure>& closure, absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts `closure` back at the front of the queue.
  void Requeue(std::shared_ptr<Closure> closure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When a ps failed and nothing is in flight, calls recover_ps (unlocking meanwhile).
  void MaybeRecoverPs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finishes every queued closure with `status`.
  void FailQueued(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When no worker has been usable for too long, fails the queue naming the workers.
  void CheckStarved() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanDispatch() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() && !ps_paused_;
  }
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.empty() && in_flight_ == 0;
  }

  const std::vector<ScheduledWorker*> workers_;  // Not owned.
  const ClosureSchedulerOptions options_;
  const absl::Time started_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<Closure>> queue_ ABSL_GUARDED_BY(mu_);
  // When the queue last went from empty to not empty: closures wait from then on.
  absl::Time queued_since_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerState> states_ ABSL_GUARDED_BY(mu_);
  // A closure reported a failed ps: nothing is dispatched until it is recovered.
  bool ps_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool recovering_ ABSL_GUARDED_BY(mu_) = false;
  int64_t ps_recoveries_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::vector<std::thread> threads_;  // one per worker
};

}  // namespace pstrain::distribute

#endif  // PSTRAIN_DISTRIBUTE_CLOSURE_SCHEDULER_H_
