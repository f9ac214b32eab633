#include "ps_server/ps_task.h"

#include "absl/strings/str_cat.h"
#include "chief/task_runtime.h"
#include "common/logging.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

namespace pstrain {

int RunPsTask(const DaemonOptions& options, ShutdownSignal* shutdown) {
  VariableStore store;
  PsServiceImpl service(&store, [shutdown](const std::string& reason) {
    shutdown->Request(0, absl::StrCat("Shutdown RPC: ", reason));
  });
  absl::StatusOr<std::unique_ptr<TaskRuntime>> runtime =
      TaskRuntime::Start(options, {&service}, shutdown);
  if (!runtime.ok()) {
    LogError(runtime.status().message());
    return ExitCodeForStartError(runtime.status());
  }
  // A ps has nothing to build: it serves whatever the chief creates on it.
  if ((*runtime)->Register().ok()) (*runtime)->StartHeartbeats();
  return (*runtime)->WaitAndStop();
}

}  // namespace pstrain
