#ifndef PSTRAIN_COMMON_METRICS_DAEMON_METRICS_H_
#define PSTRAIN_COMMON_METRICS_DAEMON_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/metrics_server.h"
#include "common/metrics/process_metrics.h"

namespace pstrain {

// A daemon's metrics: its registry (always, so code counts whether or not anyone looks)
// with the process metrics and build info, and, with --metrics_port=N (N > 0), the HTTP
// server for /metrics (and the chief's and train's dashboard at /) on every interface,
// announced in one log line. Every daemon (ps_server, worker, chief, train) takes
//   --metrics_port   0 = off (the default), else the port (each task its own)
//   --metrics_linger how long the server stays up after the job ended, so that a
//                    Prometheus scraping every few seconds records the final values
//                    (a Kubernetes Job's pod otherwise takes them with it); SIGTERM or
//                    SIGINT ends it early (EndLinger), as when the pod is deleted
class DaemonMetrics {
 public:
  // From the flags, for task (`task_type`, `task_index`) of this build (version, CUDA).
  // Errors: UNAVAILABLE the port cannot be bound (named); INVALID_ARGUMENT a port out of
  // range.
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> FromFlags(const std::string& task_type,
                                                                  int task_index);
  // The registry alone (no HTTP server, no linger): a daemon body run by a test, a bench.
  static std::unique_ptr<DaemonMetrics> WithoutServer(const std::string& task_type,
                                                      int task_index);
  // With an explicit port (0: no server) and linger.
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> Start(const ProcessMetricsOptions& process,
                                                              int port, absl::Duration linger);

  MetricsRegistry* registry() const { return registry_.get(); }
  // Null when --metrics_port is 0.
  MetricsServer* server() const { return server_.get(); }

  // Keeps serving for --metrics_linger (when a server runs), or until EndLinger, then
  // returns.
  void Linger() const;
  // Ends a Linger in progress, and any later one, at once. Called by the signal thread
  // (common/daemon/daemon_runtime.cc) on SIGTERM/SIGINT; thread-safe.
  void EndLinger() { linger_ended_.Notify(); }

 private:
  DaemonMetrics() = default;

  std::shared_ptr<MetricsRegistry> registry_;
  std::unique_ptr<MetricsServer> server_;
  absl::Duration linger_;
  absl::Notification linger_ended_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_METRICS_DAEMON_METRICS_H_
