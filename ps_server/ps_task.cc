#include "ps_server/ps_task.h"

#include "absl/strings/str_cat.h"
#include "common/daemon/exit_codes.h"
#include "common/daemon/task_runtime.h"
#include "google/protobuf/util/json_util.h"
#include "common/logging.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

// What GetStatus would answer now, as one line of protobuf's JSON: once the task is gone
// its counters and versions stay readable in the log (an operator's post-mortem, and the
// cluster tests' check of the consistency rules against the ps's own counts).
void LogFinalStatus(int task_index, const VariableStore& store) {
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(DescribeStore(store), &json, print).ok()) {
    return;
  }
  LogInfo(absl::StrCat("ps task ", task_index, " final status: ", json));
}

}  // namespace

int RunPsTask(DaemonRuntime* runtime) {
  VariableStore store;
  PsMetrics ps_metrics(runtime->metrics()->registry(), &store);
  ShutdownSignal* shutdown = runtime->shutdown();
  PsServiceOptions options;
  // Only the job's own workers take part in its pushes (sync rounds, staleness).
  options.num_workers = runtime->options().config.cluster.num_tasks("worker");
  PsServiceImpl service(
      &store,
      [shutdown](const std::string& reason) {
        shutdown->Request(kExitOk, absl::StrCat("Shutdown RPC: ", reason));
      },
      options);
  service.set_metrics(&ps_metrics);
  absl::StatusOr<std::unique_ptr<TaskRuntime>> task = TaskRuntime::Start(runtime, {&service});
  if (!task.ok()) {
    LogError(task.status().message());
    return ExitCodeFor(task.status());
  }
  // A ps has nothing to build: it serves whatever the chief creates on it.
  if ((*task)->Register().ok()) (*task)->StartHeartbeats();
  const int exit_code = (*task)->WaitAndStop();
  LogWithFields('I', "served the job",
                {{"pushes", store.num_pushes()}, {"pulls", store.num_pulls()}});
  LogFinalStatus(runtime->options().config.task.index, store);
  runtime->metrics()->Linger();
  return exit_code;
}

}  // namespace pstrain
