#ifndef PSTRAIN_COMMON_PROCESS_MEMORY_H_
#define PSTRAIN_COMMON_PROCESS_MEMORY_H_

// The memory a process holds now and the most it ever held, as the kernel counts them
// (/proc/self/status: VmRSS and VmHWM), so that every task can show what it holds: a
// Prometheus gauge on its metrics port (common/metrics/process_metrics.h), its heartbeats
// to the chief, and through them a column of `psctl status`.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

struct ProcessMemory {
  int64_t resident_bytes = 0;       // VmRSS
  int64_t peak_resident_bytes = 0;  // VmHWM, the high-water mark of VmRSS
};

// VmRSS and VmHWM of a /proc/<pid>/status text ("VmRSS:\t  1234 kB" lines).
// Errors: INVALID_ARGUMENT a line missing or not a count of kB.
absl::StatusOr<ProcessMemory> ParseProcessMemory(absl::string_view proc_status);

// This process's, from /proc/self/status.
// Errors: UNAVAILABLE the file cannot be read (no /proc); ParseProcessMemory's.
absl::StatusOr<ProcessMemory> ReadProcessMemory();

// Another process's, from /proc/<pid>/status (a test watching a daemon it started).
// Errors: as ReadProcessMemory's (UNAVAILABLE also when the process is gone).
absl::StatusOr<ProcessMemory> ReadProcessMemoryOf(int pid);

// "peak resident memory: N bytes (VmHWM)" of this process, or why it is unknown: what the
// tools print with --print_peak_memory, for a test that checks they stay bounded (a
// parent's wait4 ru_maxrss also counts what a spawned child inherited at exec).
std::string PeakMemoryLine();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_PROCESS_MEMORY_H_
