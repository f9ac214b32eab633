#include "ps_server/ps_task.h"

#include "absl/strings/str_cat.h"
#include "chief/rpc/grpc_chief_client.h"
#include "chief/task_agent.h"
#include "common/logging.h"
#include "common/rpc/grpc_util.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

namespace pstrain {

int RunPsTask(const DaemonOptions& options, ShutdownSignal* shutdown) {
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

  VariableStore store;
  PsServiceImpl service(&store, [shutdown](const std::string& reason) {
    shutdown->Request(0, absl::StrCat("Shutdown RPC: ", reason));
  });
  absl::StatusOr<RunningServer> server = StartServer({*listen, {&service}});
  if (!server.ok()) {
    LogError(server.status().message());
    return 1;
  }
  LogInfo(absl::StrCat("ps task ", task.index, " serving on port ", server->port));

  std::unique_ptr<ChiefClient> chief = CreateGrpcChiefClient(*chief_address, options.rpc_timeout);
  TaskAgent agent({"ps", task.index, *own_address, options.register_timeout,
                   options.heartbeat_interval, options.chief_timeout},
                  chief.get(), shutdown);
  absl::StatusOr<RegisterTaskResponse> registered = agent.Register();
  if (!registered.ok()) {
    if (registered.status().code() != absl::StatusCode::kCancelled) {
      shutdown->Request(1, std::string(registered.status().message()));
    }
  } else {
    agent.StartHeartbeats();
  }

  shutdown->Wait();
  const int exit_code = shutdown->exit_code();
  (exit_code == 0 ? LogInfo : LogError)(absl::StrCat("shutting down: ", shutdown->reason()));
  SetServing(server->server.get(), false);
  // Give in-flight calls (the Shutdown RPC's own answer among them) a moment to finish.
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return exit_code;
}

}  // namespace pstrain
