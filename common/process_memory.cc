#include "common/process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pstrain {
namespace {

// The value of the "<key>: <N> kB" line, in bytes; -1 when there is none or it is not one.
int64_t KilobytesLine(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, ":")) continue;
    line = absl::StripAsciiWhitespace(line);
    int64_t kb = 0;
    if (!absl::ConsumeSuffix(&line, "kB") ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kb) || kb < 0 ||
        kb > (int64_t{1} << 52)) {
      return -1;
    }
    return kb * 1024;
  }
  return -1;
}

}  // namespace

absl::StatusOr<ProcessMemory> ParseProcessMemory(absl::string_view proc_status) {
  ProcessMemory memory;
  memory.resident_bytes = KilobytesLine(proc_status, "VmRSS");
  memory.peak_resident_bytes = KilobytesLine(proc_status, "VmHWM");
  if (memory.resident_bytes < 0 || memory.peak_resident_bytes < 0) {
    return absl::InvalidArgumentError(
        "the process status has no VmRSS or VmHWM line of the form \"VmRSS: <N> kB\"");
  }
  return memory;
}

namespace {

absl::StatusOr<ProcessMemory> ReadProcessMemoryFrom(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseProcessMemory(text.str());
}

}  // namespace

absl::StatusOr<ProcessMemory> ReadProcessMemory() {
  return ReadProcessMemoryFrom("/proc/self/status");
}

absl::StatusOr<ProcessMemory> ReadProcessMemoryOf(int pid) {
  return ReadProcessMemoryFrom(absl::StrCat("/proc/", pid, "/status"));
}

std::string PeakMemoryLine() {
  absl::StatusOr<ProcessMemory> memory = ReadProcessMemory();
  if (!memory.ok()) return absl::StrCat("peak resident memory unknown: ", memory.status().message());
  return absl::StrCat("peak resident memory: ", memory->peak_resident_bytes, " bytes (VmHWM)");
}

}  // namespace pstrain
