#include "worker/rpc/worker_service.h"

#include <utility>

#include "common/rpc/grpc_util.h"

namespace pstrain {

WorkerServiceImpl::WorkerServiceImpl(WorkerFunctions* functions,
                                     std::function<void(const std::string&)> on_shutdown)
    : functions_(functions), on_shutdown_(std::move(on_shutdown)) {}

grpc::Status WorkerServiceImpl::RunFunction(grpc::ServerContext*,
                                            const RunFunctionRequest* request,
                                            RunFunctionResponse* response) {
  absl::StatusOr<RunFunctionResponse> result = functions_->Run(*request);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::GetStatus(grpc::ServerContext*,
                                          const FunctionWorkerStatusRequest*,
                                          FunctionWorkerStatusResponse* response) {
  *response = functions_->Status();
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Shutdown(grpc::ServerContext*, const ShutdownRequest* request,
                                         ShutdownResponse*) {
  on_shutdown_(request->reason());
  return grpc::Status::OK;
}

}  // namespace pstrain
