#include "pstrain/internal/ps_task.h"

#include <utility>

#include "common/status_macros.h"
#include "ps_server/rpc/ps_service.h"

namespace pstrain::distribute::internal {

absl::StatusOr<std::unique_ptr<PsTask>> PsTask::Start(
    const StrategyOptions& options, TfConfig config,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<PsTask> task(new PsTask(std::move(config)));
  task->server_ = std::make_unique<TaskServer>(options, task->config_);
  PsServiceOptions service_options;
  service_options.num_workers = task->num_workers();
  auto service = std::make_unique<PsServiceImpl>(
      &task->store_, task->server_->shutdown_callback(), service_options);
  service->set_metrics(&task->metrics_);
  task->service_ = std::move(service);
  PS_RETURN_IF_ERROR(task->server_->Start({task->service_.get()}, std::move(credentials)));
  return task;
}

absl::Status PsTask::Serve() {
  absl::Status served = server_->WaitForChief();
  LogFinalPsStatus(config_.task.index, store_, metrics_);
  return served;
}

}  // namespace pstrain::distribute::internal
