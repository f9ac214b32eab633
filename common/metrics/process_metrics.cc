#include "common/metrics/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/process_memory.h"

namespace pstrain {
namespace {

struct ProcStat {
  double cpu_seconds = 0;
  double start_time_seconds = 0;  // since the epoch
  double virtual_bytes = 0;
  double resident_bytes = 0;
};

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The kernel's boot time (seconds since the epoch): /proc/stat's btime.
double BootTimeSeconds() {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/stat"), '\n')) {
    double btime = 0;
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtod(line, &btime)) return btime;
  }
  return 0;
}

// /proc/self/stat: fields after the command's closing parenthesis, from field 3 (state).
bool ReadProcStat(ProcStat* stat) {
  const std::string text = ReadFile("/proc/self/stat");
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  std::vector<std::string> fields =
      absl::StrSplit(text.substr(paren + 2), ' ', absl::SkipEmpty());
  // Field N of proc(5) is fields[N - 3].
  if (fields.size() < 22) return false;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  double utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
  if (!absl::SimpleAtod(fields[14 - 3], &utime) || !absl::SimpleAtod(fields[15 - 3], &stime) ||
      !absl::SimpleAtod(fields[22 - 3], &start) || !absl::SimpleAtod(fields[23 - 3], &vsize) ||
      !absl::SimpleAtod(fields[24 - 3], &rss)) {
    return false;
  }
  stat->cpu_seconds = (utime + stime) / ticks;
  stat->start_time_seconds = BootTimeSeconds() + start / ticks;
  stat->virtual_bytes = vsize;
  stat->resident_bytes = rss * static_cast<double>(sysconf(_SC_PAGESIZE));
  return true;
}

double OpenFileDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the descriptor opendir itself holds
}

}  // namespace

void AddProcessMetrics(const ProcessMetricsOptions& options, MetricsRegistry* registry) {
  registry->AddGauge("pstrain_build_info", "Always 1: the build's version and CUDA support",
                     {{"version", options.version},
                      {"cuda", options.built_with_cuda ? "true" : "false"}})
      .Set(1);
  registry->AddGauge("pstrain_task_info", "Always 1: which task of the cluster this is",
                     {{"task_type", options.task_type},
                      {"task_index", absl::StrCat(options.task_index)}})
      .Set(1);
  registry->AddCollector([](std::vector<prometheus::MetricFamily>* families) {
    ProcStat stat;
    if (!ReadProcStat(&stat)) return;
    using prometheus::MetricType;
    MetricFamilyBuilder("process_cpu_seconds_total", "User and system CPU time spent",
                        MetricType::Counter)
        .Add(stat.cpu_seconds)
        .AppendTo(families);
    MetricFamilyBuilder("process_resident_memory_bytes", "Resident memory size",
                        MetricType::Gauge)
        .Add(stat.resident_bytes)
        .AppendTo(families);
    // The peak is what decides whether a task fits its machine: a chief that evaluates
    // by rows stays flat while the ps grow with the table (README "Large embeddings").
    if (absl::StatusOr<ProcessMemory> memory = ReadProcessMemory(); memory.ok()) {
      MetricFamilyBuilder("pstrain_peak_resident_memory_bytes",
                          "The most resident memory this process has held (VmHWM)",
                          MetricType::Gauge)
          .Add(static_cast<double>(memory->peak_resident_bytes))
          .AppendTo(families);
    }
    MetricFamilyBuilder("process_virtual_memory_bytes", "Virtual memory size", MetricType::Gauge)
        .Add(stat.virtual_bytes)
        .AppendTo(families);
    MetricFamilyBuilder("process_start_time_seconds",
                        "Start time of the process since the Unix epoch", MetricType::Gauge)
        .Add(stat.start_time_seconds)
        .AppendTo(families);
    MetricFamilyBuilder("process_open_fds", "Open file descriptors", MetricType::Gauge)
        .Add(OpenFileDescriptors())
        .AppendTo(families);
  });
}

}  // namespace pstrain
