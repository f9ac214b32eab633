#ifndef PSTRAIN_PS_SERVER_RPC_HANDOFF_THREADS_H_
#define PSTRAIN_PS_SERVER_RPC_HANDOFF_THREADS_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// Threads for the calls that may block. gRPC's callback API runs a handler on
// one of the few threads that also read and write every connection, so a
// handler that waits (a sync push waiting for the other workers' pushes, a
// bounded-staleness push waiting for the slowest worker) would hold back the
// very pushes it waits for. Such a call runs here instead: on an idle thread of
// the pool, else on a new one (never queued behind a waiting call, so no wait
// can deadlock on a full pool). A thread stays for the next call until the pool
// is destroyed: there are at most as many as calls ever ran here at once.
class HandoffThreads {
 public:
  HandoffThreads() = default;
  HandoffThreads(const HandoffThreads&) = delete;
  HandoffThreads& operator=(const HandoffThreads&) = delete;
  // Runs what was handed over and not started yet, then joins every thread.
  ~HandoffThreads();

  void Run(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  // Threads started so far, and those of them waiting for a task.
  int threads() const ABSL_LOCKS_EXCLUDED(mu_);
  int idle_threads() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  absl::CondVar work_;  // signalled when a task is queued or the pool stops
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads waiting on work_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_HANDOFF_THREADS_H_
