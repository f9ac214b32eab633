#include "common/metrics/daemon_metrics.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/math/backend_factory.h"
#include "common/status_macros.h"
#include "common/version.h"

ABSL_FLAG(int, metrics_port, 0,
          "Serve Prometheus metrics at http://HOST:PORT/metrics (the chief and train also a "
          "live dashboard at /); 0 = off");
ABSL_FLAG(absl::Duration, metrics_linger, absl::ZeroDuration(),
          "How long /metrics stays up after the job ended, so the final values are scraped");

namespace pstrain {

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::FromFlags(
    const std::string& task_type, int task_index) {
  return Start({task_type, task_index, kPstrainVersion, BuiltWithCuda()},
               absl::GetFlag(FLAGS_metrics_port), absl::GetFlag(FLAGS_metrics_linger));
}

std::unique_ptr<DaemonMetrics> DaemonMetrics::WithoutServer(const std::string& task_type,
                                                            int task_index) {
  // Port 0 starts no server, so nothing can fail.
  return *Start({task_type, task_index, kPstrainVersion, BuiltWithCuda()}, 0,
                absl::ZeroDuration());
}

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Start(
    const ProcessMetricsOptions& process, int port, absl::Duration linger) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_port=", port, " is not a port (0 = off, 1-65535)"));
  }
  std::unique_ptr<DaemonMetrics> metrics(new DaemonMetrics());
  metrics->registry_ = std::make_shared<MetricsRegistry>();
  metrics->linger_ = linger;
  AddProcessMetrics(process, metrics->registry_.get());
  if (port > 0) {
    PS_ASSIGN_OR_RETURN(metrics->server_, MetricsServer::Start(port, metrics->registry_));
    LogInfo(absl::StrCat("metrics on http://0.0.0.0:", metrics->server_->port(), "/metrics"));
  }
  return metrics;
}

void DaemonMetrics::Linger() const {
  if (server_ == nullptr || linger_ <= absl::ZeroDuration()) return;
  if (linger_ended_.HasBeenNotified()) return;
  LogInfo(absl::StrCat("the job is over; /metrics stays up for ",
                       absl::FormatDuration(linger_)));
  if (linger_ended_.WaitForNotificationWithTimeout(linger_)) {
    LogInfo("told to stop: /metrics goes down now");
  }
}

}  // namespace pstrain
