#ifndef PSTRAIN_COMMON_DAEMON_SIGNALS_H_
#define PSTRAIN_COMMON_DAEMON_SIGNALS_H_

#include <functional>

#include "absl/time/time.h"

namespace pstrain {

// SIGTERM and SIGINT, the signals that stop a daemon, are taken by one thread with
// sigwait(), so nothing runs in a signal handler. For that every other thread must block
// them, including threads that libraries start before main(): OpenBLAS starts its thread
// pool when it is loaded, and a thread that does not block SIGTERM gets it and dies of it
// (exit 143, no log line). Threads inherit the mask of the thread that creates them, so
// the signals are blocked first thing: //common/daemon:block_signals_at_load puts
// BlockShutdownSignals in the executable's .preinit_array, which the dynamic loader runs
// before the initializer of any shared library.

// Blocks SIGTERM and SIGINT in the calling thread. Async-signal-safe; callable before
// main() and before any C++ initializer.
void BlockShutdownSignals();

// True when BlockShutdownSignals ran from .preinit_array (the binary links
// //common/daemon:block_signals_at_load), i.e. before any library could start a thread.
bool ShutdownSignalsBlockedAtLoad();
// Called by the .preinit_array entry.
void MarkShutdownSignalsBlockedAtLoad();

// Starts the thread that takes SIGTERM and SIGINT. On the first one it logs a line and
// calls `on_first_signal` with the signal's name ("SIGTERM"), which starts the daemon's
// shutdown and returns the exit code the daemon is heading for. From then on the daemon
// has `grace` to exit by itself: a second signal, or the end of the grace, ends the
// process at once (_exit) with that code, after one log line.
// Call once per process, from main() before starting threads of its own (the signals
// must already be blocked in every thread: BlockShutdownSignals is called here too, for
// binaries that did not block them at load).
void StartSignalThread(absl::Duration grace,
                       std::function<int(const char* signal_name)> on_first_signal);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_SIGNALS_H_
