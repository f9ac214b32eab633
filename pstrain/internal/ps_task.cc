#include "pstrain/internal/ps_task.h"

#include <utility>

#include "common/status_macros.h"

namespace pstrain::distribute::internal {

absl::StatusOr<std::unique_ptr<PsTask>> PsTask::Start(
    const StrategyOptions& options, TfConfig config,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<PsTask> task(new PsTask(std::move(config)));
  task->server_ = std::make_unique<TaskServer>(options, task->config_);
  PsInstance::Options ps_options;
  ps_options.on_shutdown = task->server_->shutdown_callback();
  ps_options.registry = &task->metrics_registry_;
  ps_options.num_workers = task->num_workers();
  PS_ASSIGN_OR_RETURN(task->ps_, PsInstance::Create(std::move(ps_options)));
  PS_RETURN_IF_ERROR(task->server_->Start({task->ps_->service()}, std::move(credentials)));
  return task;
}

absl::Status PsTask::Serve() {
  absl::Status served = server_->WaitForChief();
  ps_->LogFinalStatus(config_.task.index);
  return served;
}

}  // namespace pstrain::distribute::internal
