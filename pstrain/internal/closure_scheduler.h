#ifndef PSTRAIN_PSTRAIN_INTERNAL_CLOSURE_SCHEDULER_H_
#define PSTRAIN_PSTRAIN_INTERNAL_CLOSURE_SCHEDULER_H_

// The chief side of ClusterCoordinator (pstrain/cluster_coordinator.h), as TensorFlow's
// ClusterCoordinator schedules closures: functions are queued, and one thread per worker
// takes the next one whenever its worker is free, so faster workers run more. A worker
// that cannot be reached (or misses the function's deadline) is lost: the function it
// had goes back to the front of the queue and runs on another worker (at least once, as
// in TensorFlow), and the lost worker takes functions again once it answers ready. The
// first function that fails makes Join return its error; the functions still queued are
// then cancelled. When no worker has been usable for the recovery timeout (the startup
// timeout before any was) the queued functions fail UNAVAILABLE naming the workers.
// Knows nothing of gRPC: workers are FunctionWorkerClients.
//
// Thread-safety: every method may be called from any thread.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/function.pb.h"
#include "pstrain/internal/function_worker_client.h"

namespace pstrain::distribute::internal {

// One scheduled function and, once it is done, its result (a RemoteValue's state).
class ClosureState {
 public:
  explicit ClosureState(RunFunctionRequest request) : request_(std::move(request)) {}
  const RunFunctionRequest& request() const { return request_; }

  // Blocks until the function is done; its value as numbers, or its error (CANCELLED
  // when an earlier function failed first, UNAVAILABLE when no worker was left).
  absl::StatusOr<std::vector<double>> Wait() const ABSL_LOCKS_EXCLUDED(mu_);
  bool done() const ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(absl::StatusOr<std::vector<double>> result) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const RunFunctionRequest request_;
  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<std::vector<double>> result_ ABSL_GUARDED_BY(mu_);
};

struct ClosureSchedulerOptions {
  // How long the queued functions wait for a first worker to become ready.
  absl::Duration startup_timeout = absl::Seconds(60);
  // How long they wait, once every worker is lost, for one to come back.
  absl::Duration recovery_timeout = absl::Seconds(60);
  // How often a worker that is not ready is asked again.
  absl::Duration poll_interval = absl::Milliseconds(200);
};

class ClosureScheduler {
 public:
  // `workers` are not owned and must outlive the scheduler.
  ClosureScheduler(std::vector<FunctionWorkerClient*> workers, ClosureSchedulerOptions options);
  // Cancels the queued functions (CANCELLED) and stops; a function in flight finishes
  // first (bounded by its deadline).
  ~ClosureScheduler();
  ClosureScheduler(const ClosureScheduler&) = delete;
  ClosureScheduler& operator=(const ClosureScheduler&) = delete;

  // Queues `request` (its closure_id is set here) and returns at once.
  std::shared_ptr<ClosureState> Schedule(RunFunctionRequest request) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every scheduled function is done. Returns the first function error since
  // the previous Join (and forgets it, so scheduling goes on), else OK.
  absl::Status Join() ABSL_LOCKS_EXCLUDED(mu_);

  // Functions run (to success or to their own error) by each worker, in worker order.
  std::vector<int64_t> functions_run() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct WorkerState {
    bool ready = false;
    bool ever_ready = false;
    absl::Time unusable_since;
    std::string last_error;
    int64_t functions_run = 0;
  };

  void WorkerLoop(int w);
  // Asks worker w whether it is ready; false after waiting poll_interval (or stopping).
  bool BecomeReady(int w) ABSL_LOCKS_EXCLUDED(mu_);
  // Finishes `closure` with the worker's answer; a function error cancels the queue.
  void Complete(int w, const std::shared_ptr<ClosureState>& closure,
                const RunFunctionResponse& response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails every queued function with `status`.
  void FailQueued(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When no worker has been usable for too long, fails the queue naming the workers.
  void CheckStarved() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<FunctionWorkerClient*> workers_;  // Not owned.
  const ClosureSchedulerOptions options_;
  const absl::Time started_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<ClosureState>> queue_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_closure_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerState> states_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::vector<std::thread> threads_;  // one per worker
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_CLOSURE_SCHEDULER_H_
