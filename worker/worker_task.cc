#include "worker/worker_task.h"

#include "absl/strings/str_cat.h"
#include "chief/rpc/grpc_chief_client.h"
#include "chief/task_agent.h"
#include "common/logging.h"
#include "common/math/cpu_backend.h"
#include "common/rpc/grpc_util.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "worker/rpc/worker_service.h"
#include "worker/training_worker.h"

namespace pstrain {

int RunWorkerTask(const DaemonOptions& options, ShutdownSignal* shutdown) {
  const TaskId& task = options.config.task;
  absl::StatusOr<std::string> listen = ResolveListenAddress(options);
  absl::StatusOr<std::string> own_address = options.config.cluster.address(task);
  absl::StatusOr<std::string> chief_address = ChiefAddress(options.config.cluster);
  for (const absl::Status& s : {listen.status(), own_address.status(), chief_address.status()}) {
    if (!s.ok()) {
      LogError(s.message());
      return 1;
    }
  }

  WorkerServiceImpl service([shutdown](const std::string& reason) {
    shutdown->Request(0, absl::StrCat("Shutdown RPC: ", reason));
  });
  absl::StatusOr<RunningServer> server = StartServer({*listen, {&service}});
  if (!server.ok()) {
    LogError(server.status().message());
    return 1;
  }
  LogInfo(absl::StrCat("worker task ", task.index, " serving on port ", server->port));

  std::unique_ptr<ChiefClient> chief = CreateGrpcChiefClient(*chief_address, options.rpc_timeout);
  TaskAgent agent({"worker", task.index, *own_address, options.register_timeout,
                   options.heartbeat_interval, options.chief_timeout},
                  chief.get(), shutdown);
  absl::StatusOr<RegisterTaskResponse> registered = agent.Register();
  if (!registered.ok()) {
    if (registered.status().code() != absl::StatusCode::kCancelled) {
      shutdown->Request(1, std::string(registered.status().message()));
    }
  } else {
    const absl::Duration rpc_timeout = options.rpc_timeout;
    absl::StatusOr<std::unique_ptr<TrainingWorker>> worker = TrainingWorker::Create(
        registered->job_json(), registered->job_base_dir(), task.index, CreateCpuBackend(),
        [rpc_timeout](int ps_index, const std::string& address) {
          return CreateGrpcPsClient(ps_index, address, rpc_timeout);
        });
    if (!worker.ok()) {
      ReportRequest report;
      report.set_task_type("worker");
      report.set_task_index(task.index);
      report.set_message(std::string(worker.status().message()));
      (void)chief->Report(report);
      shutdown->Request(1, absl::StrCat("cannot build the job: ", worker.status().message()));
    } else {
      LogInfo(absl::StrCat("job received; computing on ", (*worker)->GetStatus().backend()));
      service.SetWorker(*std::move(worker));
      agent.StartHeartbeats();
    }
  }

  shutdown->Wait();
  const int exit_code = shutdown->exit_code();
  (exit_code == 0 ? LogInfo : LogError)(absl::StrCat("shutting down: ", shutdown->reason()));
  SetServing(server->server.get(), false);
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return exit_code;
}

}  // namespace pstrain
