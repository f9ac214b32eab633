#include "pstrain/internal/worker_task.h"

#include <string>
#include <utility>

#include "common/status_macros.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "pstrain/internal/function_worker_service.h"

namespace pstrain::distribute::internal {

absl::StatusOr<std::unique_ptr<WorkerTask>> WorkerTask::Start(
    const StrategyOptions& options, TfConfig config,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<WorkerTask> task(new WorkerTask(std::move(config)));
  const std::vector<std::string>& ps = task->config_.cluster.tasks(Role::kPs);
  for (size_t i = 0; i < ps.size(); ++i) {
    task->ps_.push_back(CreateGrpcPsClient(static_cast<int>(i), ps[i], options.rpc_timeout));
  }
  task->server_ = std::make_unique<TaskServer>(options, task->config_);
  task->service_ =
      std::make_unique<FunctionWorkerService>(&task->runner_, task->server_->shutdown_callback());
  PS_RETURN_IF_ERROR(task->server_->Start({task->service_.get()}, std::move(credentials)));
  return task;
}

absl::Status WorkerTask::Serve() {
  runner_.SetReady(true);
  absl::Status done = server_->WaitForChief();
  runner_.SetReady(false);
  return done;
}

std::vector<PsClient*> WorkerTask::ps_clients() const {
  std::vector<PsClient*> out;
  for (const auto& ps : ps_) out.push_back(ps.get());
  return out;
}

}  // namespace pstrain::distribute::internal
