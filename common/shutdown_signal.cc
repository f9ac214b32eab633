#include "common/shutdown_signal.h"

#include <signal.h>

#include <thread>

namespace pstrain {

void ShutdownSignal::Request(int exit_code, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (requested_) return;
  requested_ = true;
  exit_code_ = exit_code;
  reason_ = reason;
}

void ShutdownSignal::Wait() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&requested_));
}

bool ShutdownSignal::WaitFor(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&requested_), timeout);
}

bool ShutdownSignal::requested() const {
  absl::MutexLock lock(&mu_);
  return requested_;
}

int ShutdownSignal::exit_code() const {
  absl::MutexLock lock(&mu_);
  return exit_code_;
}

std::string ShutdownSignal::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

void ShutdownSignal::InstallHandlers(ShutdownSignal* signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([signal, set] {
    int received = 0;
    sigwait(&set, &received);
    signal->Request(0, received == SIGTERM ? "SIGTERM" : "SIGINT");
  }).detach();
}

}  // namespace pstrain
