#include "worker/worker_task.h"

#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/daemon/exit_codes.h"
#include "common/daemon/task_runtime.h"
#include "common/logging.h"
#include "common/math/backend_factory.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "worker/rpc/worker_service.h"
#include "worker/training_worker.h"
#include "worker/worker_functions.h"
#include "worker/worker_metrics.h"

namespace pstrain {

int RunWorkerTask(DaemonRuntime* runtime, const std::string& device,
                  absl::Duration step_delay) {
  const DaemonOptions& options = runtime->options();
  ShutdownSignal* shutdown = runtime->shutdown();
  // The device is checked before joining the cluster: a worker that cannot compute where
  // it was told to should fail at once, not after the chief has counted on it.
  std::string note;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(device, &note);
  if (!backend.ok()) {
    LogError(absl::StrCat("--device=", device, ": ", backend.status().message()));
    return kExitBadConfiguration;
  }
  if (!note.empty()) LogInfo(note);
  WorkerMetrics worker_metrics(runtime->metrics()->registry(), (*backend)->name());
  // The chief runs its training chunks here as a function (kTrainChunkFunction), over the
  // FunctionWorker service a custom loop's workers serve too.
  // Declared before the server (TaskRuntime) so that they outlive every call it serves.
  std::unique_ptr<TrainingWorker> training_worker;
  WorkerFunctions functions;
  WorkerServiceImpl service(&functions, [shutdown](const std::string& reason) {
    shutdown->Request(kExitOk, absl::StrCat("Shutdown RPC: ", reason));
  });
  absl::StatusOr<std::unique_ptr<TaskRuntime>> task = TaskRuntime::Start(runtime, {&service});
  if (!task.ok()) {
    LogError(task.status().message());
    return ExitCodeFor(task.status());
  }
  absl::StatusOr<RegisterTaskResponse> registered = (*task)->Register();
  if (registered.ok()) {
    const absl::Duration rpc_timeout = options.rpc_timeout;
    absl::StatusOr<std::unique_ptr<TrainingWorker>> worker = TrainingWorker::Create(
        registered->job_json(), registered->job_base_dir(), options.config.task.index,
        *std::move(backend), [rpc_timeout](int ps_index, const std::string& address) {
          return CreateGrpcPsClient(ps_index, address, rpc_timeout);
        });
    if (worker.ok()) {
      LogInfo(absl::StrCat("job received; computing on ", (*worker)->GetStatus().backend()));
      (*worker)->set_metrics(&worker_metrics);
      (*worker)->SetStepDelayForTesting(step_delay);
      training_worker = *std::move(worker);
      absl::Status registered_chunk = RegisterTrainChunk(training_worker.get(), &functions);
      if (!registered_chunk.ok()) LogError(registered_chunk.message());
      (*task)->StartHeartbeats();
    } else {
      // The chief's log should say why this worker will never become ready.
      ReportRequest report;
      report.set_task_type(std::string(RoleName(options.config.task.type)));
      report.set_task_index(options.config.task.index);
      report.set_message(std::string(worker.status().message()));
      (void)(*task)->chief()->Report(report);
      shutdown->Request(kExitFailure,
                        absl::StrCat("cannot build the job: ", worker.status().message()));
    }
  }
  const int exit_code = (*task)->WaitAndStop();
  runtime->metrics()->Linger();
  return exit_code;
}

}  // namespace pstrain
