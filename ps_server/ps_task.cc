#include "ps_server/ps_task.h"

#include "absl/strings/str_cat.h"
#include "chief/task_runtime.h"
#include "common/logging.h"
#include "common/metrics/daemon_metrics.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

namespace pstrain {

int RunPsTask(const DaemonOptions& options, ShutdownSignal* shutdown) {
  absl::StatusOr<std::unique_ptr<DaemonMetrics>> metrics =
      DaemonMetrics::FromFlags("ps", options.config.task.index);
  if (!metrics.ok()) {
    LogError(metrics.status().message());
    return ExitCodeForStartError(metrics.status());
  }
  VariableStore store;
  PsMetrics ps_metrics((*metrics)->registry(), &store);
  PsServiceImpl service(&store, [shutdown](const std::string& reason) {
    shutdown->Request(0, absl::StrCat("Shutdown RPC: ", reason));
  });
  service.set_metrics(&ps_metrics);
  absl::StatusOr<std::unique_ptr<TaskRuntime>> runtime =
      TaskRuntime::Start(options, {&service}, shutdown);
  if (!runtime.ok()) {
    LogError(runtime.status().message());
    return ExitCodeForStartError(runtime.status());
  }
  // A ps has nothing to build: it serves whatever the chief creates on it.
  if ((*runtime)->Register().ok()) (*runtime)->StartHeartbeats();
  const int exit_code = (*runtime)->WaitAndStop();
  LogWithFields('I', "served the job",
                {{"pushes", store.num_pushes()}, {"pulls", store.num_pulls()}});
  (*metrics)->Linger();
  return exit_code;
}

}  // namespace pstrain
