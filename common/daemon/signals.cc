#include "common/daemon/signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace pstrain {
namespace {

std::atomic<bool> blocked_at_load{false};

sigset_t ShutdownSignalSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

const char* SignalName(int signal_number) {
  return signal_number == SIGTERM ? "SIGTERM" : signal_number == SIGINT ? "SIGINT" : "signal";
}

[[noreturn]] void ExitNow(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(exit_code);
}

}  // namespace

void BlockShutdownSignals() {
  const sigset_t set = ShutdownSignalSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool ShutdownSignalsBlockedAtLoad() { return blocked_at_load.load(); }

void MarkShutdownSignalsBlockedAtLoad() { blocked_at_load.store(true); }

void StartSignalThread(absl::Duration grace,
                       std::function<int(const char* signal_name)> on_first_signal) {
  BlockShutdownSignals();
  std::thread([grace, on_first_signal = std::move(on_first_signal)] {
    const sigset_t set = ShutdownSignalSet();
    int received = 0;
    while (sigwait(&set, &received) != 0) {
    }
    const char* name = SignalName(received);
    LogWarning(absl::StrCat(name, " received: shutting down (at most ",
                            absl::FormatDuration(grace), ", --shutdown_grace)"));
    const int exit_code = on_first_signal(name);
    // The grace runs from the first signal, as an orchestrator's does.
    const absl::Time give_up = absl::Now() + grace;
    while (true) {
      const absl::Duration left = give_up - absl::Now();
      if (left <= absl::ZeroDuration()) {
        LogError(absl::StrCat("did not shut down within ", absl::FormatDuration(grace),
                              " (--shutdown_grace); exiting now with code ", exit_code));
        ExitNow(exit_code);
      }
      const timespec timeout = absl::ToTimespec(left);
      const int again = sigtimedwait(&set, nullptr, &timeout);
      if (again > 0) {
        LogError(absl::StrCat("second ", SignalName(again), ": exiting now with code ",
                              exit_code));
        ExitNow(exit_code);
      }
    }
  }).detach();
}

}  // namespace pstrain
