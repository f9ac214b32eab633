// Blocks SIGTERM and SIGINT before anything else runs in a daemon: an entry of the
// executable's .preinit_array runs before the initializers of every shared library (glibc
// calls DT_PREINIT_ARRAY first), in particular before OpenBLAS's, which starts its thread
// pool. Every thread then inherits the blocked mask, and the one thread that sigwait()s
// (common/daemon/signals.h) takes the signals. Link it (alwayslink) into executables only:
// a shared object may not have a .preinit_array.

#include "common/daemon/signals.h"

namespace {

void BlockAtLoad(int, char**, char**) {
  pstrain::BlockShutdownSignals();
  pstrain::MarkShutdownSignalsBlockedAtLoad();
}

__attribute__((section(".preinit_array"), used)) void (*const block_at_load)(int, char**,
                                                                              char**) =
    &BlockAtLoad;

}  // namespace
