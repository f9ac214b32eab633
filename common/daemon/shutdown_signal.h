#ifndef PSTRAIN_COMMON_DAEMON_SHUTDOWN_SIGNAL_H_
#define PSTRAIN_COMMON_DAEMON_SHUTDOWN_SIGNAL_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

// How a daemon learns it should stop, whoever says so: a Shutdown RPC, the chief's
// heartbeat answer, a lost chief, or SIGTERM/SIGINT (common/daemon/signals.h). The first
// request wins; its exit code and reason are what the daemon exits with. Thread-safe.
class ShutdownSignal {
 public:
  // Records the first request and wakes Wait(). Later requests are ignored.
  void Request(int exit_code, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until a request arrives.
  void Wait() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until a request arrives or `timeout` passes; true if requested.
  bool WaitFor(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  bool requested() const ABSL_LOCKS_EXCLUDED(mu_);

  int exit_code() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string reason() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  int exit_code_ ABSL_GUARDED_BY(mu_) = 0;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_SHUTDOWN_SIGNAL_H_
