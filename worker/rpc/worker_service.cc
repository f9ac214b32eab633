#include "worker/rpc/worker_service.h"

#include <utility>

#include "common/rpc/grpc_util.h"

namespace pstrain {

WorkerServiceImpl::WorkerServiceImpl(std::function<void(const std::string&)> on_shutdown)
    : on_shutdown_(std::move(on_shutdown)) {}

void WorkerServiceImpl::SetWorker(std::unique_ptr<TrainingWorker> worker) {
  absl::MutexLock lock(&mu_);
  if (worker_ == nullptr) worker_ = std::move(worker);
}

TrainingWorker* WorkerServiceImpl::worker() {
  absl::MutexLock lock(&mu_);
  return worker_.get();
}

grpc::Status WorkerServiceImpl::RunSteps(grpc::ServerContext*, const RunStepsRequest* request,
                                         RunStepsResponse* response) {
  TrainingWorker* w = worker();
  if (w == nullptr) {
    return ToGrpcStatus(absl::FailedPreconditionError("this worker has no job yet"));
  }
  absl::StatusOr<RunStepsResponse> result = w->RunSteps(*request);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::GetStatus(grpc::ServerContext*, const WorkerStatusRequest*,
                                          WorkerStatusResponse* response) {
  if (TrainingWorker* w = worker()) {
    *response = w->GetStatus();
    response->set_ready(true);
  }
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Shutdown(grpc::ServerContext*, const ShutdownRequest* request,
                                         ShutdownResponse*) {
  on_shutdown_(request->reason());
  return grpc::Status::OK;
}

}  // namespace pstrain
