#include "pstrain/internal/function_worker_service.h"

#include <utility>

#include "common/rpc/grpc_util.h"

namespace pstrain::distribute::internal {

grpc::Status FunctionWorkerService::RunFunction(grpc::ServerContext*,
                                                const RunFunctionRequest* request,
                                                RunFunctionResponse* response) {
  absl::StatusOr<RunFunctionResponse> result = runner_->Run(*request);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status FunctionWorkerService::GetStatus(grpc::ServerContext*,
                                              const FunctionWorkerStatusRequest*,
                                              FunctionWorkerStatusResponse* response) {
  *response = runner_->Status();
  return grpc::Status::OK;
}

grpc::Status FunctionWorkerService::Shutdown(grpc::ServerContext*, const ShutdownRequest* request,
                                             ShutdownResponse*) {
  on_shutdown_(request->reason());
  return grpc::Status::OK;
}

}  // namespace pstrain::distribute::internal
