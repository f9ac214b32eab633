#include "chief/task_runtime.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "chief/rpc/grpc_chief_client.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<TaskRuntime>> TaskRuntime::Start(
    const DaemonOptions& options, std::vector<grpc::Service*> services, ShutdownSignal* shutdown) {
  const TaskId& task = options.config.task;
  PS_ASSIGN_OR_RETURN(std::string listen, ResolveListenAddress(options));
  PS_ASSIGN_OR_RETURN(std::string own_address, options.config.cluster.address(task));
  PS_ASSIGN_OR_RETURN(std::string chief_address, ChiefAddress(options.config.cluster));
  std::unique_ptr<TaskRuntime> runtime(new TaskRuntime());
  runtime->options_ = options;
  runtime->shutdown_ = shutdown;
  PS_ASSIGN_OR_RETURN(runtime->server_, StartServer({listen, std::move(services)}));
  LogInfo(absl::StrCat(task.type, " task ", task.index, " serving on port ",
                       runtime->server_.port));
  runtime->chief_ = CreateGrpcChiefClient(chief_address, options.rpc_timeout);
  runtime->agent_ = std::make_unique<TaskAgent>(
      TaskAgent::Options{task.type, task.index, own_address, options.register_timeout,
                         options.heartbeat_interval, options.chief_timeout},
      runtime->chief_.get(), shutdown);
  return runtime;
}

absl::StatusOr<RegisterTaskResponse> TaskRuntime::Register() {
  absl::StatusOr<RegisterTaskResponse> registered = agent_->Register();
  if (!registered.ok() && registered.status().code() != absl::StatusCode::kCancelled) {
    shutdown_->Request(1, std::string(registered.status().message()));
  }
  return registered;
}

int TaskRuntime::WaitAndStop() {
  shutdown_->Wait();
  const int exit_code = shutdown_->exit_code();
  (exit_code == 0 ? LogInfo : LogError)(absl::StrCat("shutting down: ", shutdown_->reason()));
  SetServing(server_.server.get(), false);
  // In-flight calls (the Shutdown RPC's own answer among them) get a moment to finish.
  server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return exit_code;
}

int ExitCodeForStartError(const absl::Status& status) {
  return absl::IsUnavailable(status) ? 1 : 2;
}

}  // namespace pstrain
