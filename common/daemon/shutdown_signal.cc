#include "common/daemon/shutdown_signal.h"

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

}  // namespace pstrain
