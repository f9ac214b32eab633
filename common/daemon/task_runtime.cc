#include "common/daemon/task_runtime.h"

#include <utility>

#include "common/daemon/exit_codes.h"
#include "common/daemon/rpc/grpc_chief_client.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<TaskRuntime>> TaskRuntime::Start(
    DaemonRuntime* daemon, std::vector<grpc::Service*> services) {
  const DaemonOptions& options = daemon->options();
  const TaskId& task = options.config.task;
  PS_ASSIGN_OR_RETURN(std::string own_address, options.config.cluster.address(task));
  PS_ASSIGN_OR_RETURN(std::string chief_address, ChiefAddress(options.config.cluster));
  PS_RETURN_IF_ERROR(daemon->Serve(std::move(services)));
  std::unique_ptr<TaskRuntime> runtime(new TaskRuntime());
  runtime->daemon_ = daemon;
  runtime->chief_ = CreateGrpcChiefClient(chief_address, options.rpc_timeout);
  runtime->agent_ = std::make_unique<TaskAgent>(
      TaskAgent::Options{task.type, task.index, own_address, options.register_timeout,
                         options.heartbeat_interval, options.chief_timeout},
      runtime->chief_.get(), daemon->shutdown());
  return runtime;
}

absl::StatusOr<RegisterTaskResponse> TaskRuntime::Register() {
  absl::StatusOr<RegisterTaskResponse> registered = agent_->Register();
  if (!registered.ok() && registered.status().code() != absl::StatusCode::kCancelled) {
    daemon_->shutdown()->Request(kExitFailure, std::string(registered.status().message()));
  }
  return registered;
}

int TaskRuntime::WaitAndStop() {
  const int exit_code = daemon_->WaitForShutdownAndStop();
  agent_.reset();  // joins the heartbeat thread
  return exit_code;
}

}  // namespace pstrain
