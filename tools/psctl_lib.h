#ifndef PSTRAIN_TOOLS_PSCTL_LIB_H_
#define PSTRAIN_TOOLS_PSCTL_LIB_H_

// psctl's logic, apart from main() so tests run it against real servers in-process.
//
//   psctl status --chief=HOST:PORT [--timeout=5s]   phase, epoch, step, tasks, layout
//   psctl layout --chief=HOST:PORT [--timeout=5s]   the variable layout table only
//   psctl ps --address=HOST:PORT [--timeout=5s]     a ps task's variables and counters
//   psctl checkpoint --chief=HOST:PORT [--timeout=60s]
//                                                   the chief writes a checkpoint now
//                                                   and psctl prints its path and step
//   psctl health [--address=HOST:PORT] [--timeout=5s]
//                                                   grpc.health.v1 Check: exit 0 when the
//                                                   daemon is SERVING, else 1; without
//                                                   --address, this task's own daemon
//                                                   (its TF_CONFIG port on localhost), as
//                                                   the image's HEALTHCHECK runs it
//   psctl status --watch [--interval=2s] [--count=N] ...
//                                                   the status again every interval
//                                                   (the screen redrawn on a terminal)
//                                                   until the job is done or failed, N
//                                                   times, or Ctrl-C
//
// --json on every command prints the answer as JSON instead (protobuf's JSON mapping of
// the RPC's response, proto field names; 64-bit integers are strings, as that mapping
// says), one object per line, so `psctl status --watch --json | jq` follows a job.
// Every RPC carries --timeout as its deadline (a duration such as "500ms", "5s", or a
// number of seconds), so psctl never hangs on a task that does not answer.

#include <ostream>
#include <string>
#include <vector>

#include "proto/chief.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

// Exit codes of RunPsctl, as the shell sees them.
inline constexpr int kPsctlOk = 0;
inline constexpr int kPsctlUnreachable = 1;  // an RPC failed (unreachable, deadline, ...)
inline constexpr int kPsctlUsage = 2;        // bad command line

// The layout table: one row per shard with columns variable, shard, ps, rows, shape
// (rows as "first-last/total", shape the shard's own). Entries written before
// partitioning existed show as whole variables. Ends with a newline; a header only
// when `placement` is empty.
std::string FormatLayoutTable(const std::vector<VariablePlacementEntry>& placement);

// Phase, epoch, global step, the task table and the layout table.
std::string FormatChiefStatus(const ChiefStatusResponse& status);

// A ps task's optimizer, counters and variables (name, shape, version).
std::string FormatPsStatus(const std::string& address, const PsStatusResponse& status);

// Runs psctl on `args` (without the program name): the report goes to `out`, errors to
// `err` as one line starting "psctl: " (an unreachable task is named by its address).
// Returns kPsctlOk, kPsctlUnreachable (any failed RPC, a refused checkpoint, a daemon not
// SERVING) or kPsctlUsage (an unknown command or flag, a missing or malformed flag, the
// usage text following the error; psctl health with neither --address nor TF_CONFIG).
// `terminal`: `out` is a terminal, so --watch redraws the screen instead of appending.
int RunPsctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
             bool terminal = false);

}  // namespace pstrain

#endif  // PSTRAIN_TOOLS_PSCTL_LIB_H_
