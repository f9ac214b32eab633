#ifndef PSTRAIN_PS_SERVER_CLIENT_EXCHANGE_THREADS_H_
#define PSTRAIN_PS_SERVER_CLIENT_EXCHANGE_THREADS_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// A fixed set of long-lived threads, one per lane (a PsTrainer has one lane per ps task),
// that run one round of tasks at a time: lane i's task on lane i's thread. A training step
// exchanges with every ps at once; starting and joining a std::thread per ps per step
// (RunConcurrently, common/parallel.h) cost a thread creation and a join each step, which
// these threads do not.
//
// A round either runs to completion on the calling thread's behalf (Run) or is started and
// collected later (Start, then Wait), so that the caller computes while it is in flight
// (PsTrainer's overlap). Every task of a round runs to its end; the round's status is the
// first non-OK one in lane order, so an error names the same peer whichever thread
// finished first.
//
// Thread-safe, but one round at a time: Start or Run while a round is in flight is
// refused. The destructor waits for a round in flight, then stops and joins the threads.
class ExchangeThreads {
 public:
  using Task = std::function<absl::Status()>;

  explicit ExchangeThreads(size_t lanes);
  ~ExchangeThreads();
  ExchangeThreads(const ExchangeThreads&) = delete;
  ExchangeThreads& operator=(const ExchangeThreads&) = delete;

  size_t lanes() const { return threads_.size(); }

  // Starts tasks[i] on lane i's thread (an empty function leaves the lane idle).
  // Errors: FAILED_PRECONDITION a round is in flight; INVALID_ARGUMENT more tasks than
  //         lanes. Nothing is started then.
  absl::Status Start(std::vector<Task> tasks) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a round Start began has not been collected by Wait yet.
  bool in_flight() const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every task of the round in flight has returned and ends the round: the
  // first non-OK status in lane order; OK with no round in flight.
  absl::Status Wait() ABSL_LOCKS_EXCLUDED(mu_);

  // Start and Wait, with the first task run on the calling thread (one hand-off fewer
  // per round). Errors: as Start, or the round's.
  absl::Status Run(std::vector<Task> tasks) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Lane {
    Task task;
    bool has_task = false;  // set by the round's starter, cleared by the lane's thread
    bool in_round = false;  // the lane's result belongs to the round in flight
    absl::Status result;
    absl::CondVar work;     // signalled when has_task is set or the threads stop
  };

  // Hands tasks[i] (i != skip) to the lanes' threads; `skip` runs on the caller.
  absl::Status StartLocked(std::vector<Task>& tasks, size_t skip)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop(size_t lane) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  // One per lane; the vector never changes size, each Lane's fields are guarded by mu_.
  std::vector<std::unique_ptr<Lane>> lanes_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // tasks of the round still running
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar done_;  // signalled when pending_ reaches 0
  std::vector<std::thread> threads_;  // lanes_[i]'s thread; joined by the destructor
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_EXCHANGE_THREADS_H_
