#ifndef PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_WORKER_SERVICE_H_
#define PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_WORKER_SERVICE_H_

// gRPC adapter over a FunctionRunner (proto/function.proto).

#include <functional>
#include <string>

#include "grpcpp/grpcpp.h"
#include "proto/function.grpc.pb.h"
#include "pstrain/internal/function_runner.h"

namespace pstrain::distribute::internal {

class FunctionWorkerService final : public FunctionWorker::Service {
 public:
  // `runner` is not owned. `on_shutdown` runs when a Shutdown RPC arrives, with its reason.
  FunctionWorkerService(FunctionRunner* runner, std::function<void(const std::string&)> on_shutdown)
      : runner_(runner), on_shutdown_(std::move(on_shutdown)) {}

  grpc::Status RunFunction(grpc::ServerContext* context, const RunFunctionRequest* request,
                           RunFunctionResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const FunctionWorkerStatusRequest* request,
                         FunctionWorkerStatusResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const ShutdownRequest* request,
                        ShutdownResponse* response) override;

 private:
  FunctionRunner* const runner_;  // Not owned.
  const std::function<void(const std::string&)> on_shutdown_;
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_WORKER_SERVICE_H_
