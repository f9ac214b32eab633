#include "pstrain/preemption.h"

#include <signal.h>

#include <atomic>

namespace pstrain::distribute {
namespace {

// The first signal's number; 0 while none arrived. Lock-free, so the handler may set it.
std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free atomic");

void OnSignal(int signal_number) {
  int none = 0;
  if (first_signal.compare_exchange_strong(none, signal_number)) return;
  // A second signal: the default action (the process ends at once).
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

}  // namespace

void PreemptionWatcher::Watch() {
  static const bool installed = [] {
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    // Interrupted system calls resume: the loop's threads notice the signal by polling.
    action.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    return true;
  }();
  (void)installed;
}

const char* PreemptionWatcher::Preempted() {
  switch (first_signal.load()) {
    case 0:
      return nullptr;
    case SIGINT:
      return "SIGINT";
    default:
      return "SIGTERM";
  }
}

}  // namespace pstrain::distribute
