#ifndef PSTRAIN_COMMON_METRICS_PROCESS_METRICS_H_
#define PSTRAIN_COMMON_METRICS_PROCESS_METRICS_H_

#include <string>

#include "common/metrics/metrics_registry.h"

namespace pstrain {

struct ProcessMetricsOptions {
  std::string task_type;  // "ps", "worker", "chief", "train"
  int task_index = 0;
  std::string version;
  bool built_with_cuda = false;
};

// Adds what every daemon exports about itself, read from /proc at each scrape:
//   process_cpu_seconds_total, process_resident_memory_bytes,
//   process_virtual_memory_bytes, process_open_fds, process_start_time_seconds
// (the names of Prometheus' own client libraries, which dashboards expect),
//   pstrain_peak_resident_memory_bytes (VmHWM: the most resident memory it held), and
//   pstrain_build_info{version, cuda} 1, pstrain_task_info{task_type, task_index} 1.
// Prometheus itself adds `up` for every target it scrapes.
void AddProcessMetrics(const ProcessMetricsOptions& options, MetricsRegistry* registry);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_METRICS_PROCESS_METRICS_H_
