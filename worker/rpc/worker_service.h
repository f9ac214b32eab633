#ifndef PSTRAIN_WORKER_RPC_WORKER_SERVICE_H_
#define PSTRAIN_WORKER_RPC_WORKER_SERVICE_H_

#include <functional>
#include <string>

#include "proto/function.grpc.pb.h"
#include "worker/worker_functions.h"

namespace pstrain {

// gRPC adapter of the worker daemon: the FunctionWorker service (proto/function.proto)
// over the task's WorkerFunctions. The training chunk is registered there once the task
// has the job (the chief sends it at registration); until then GetStatus says not ready
// and RunFunction answers FAILED_PRECONDITION in its response.
class WorkerServiceImpl final : public FunctionWorker::Service {
 public:
  // `functions` is not owned and must outlive the service. `on_shutdown` runs when a
  // Shutdown RPC arrives, with its reason.
  WorkerServiceImpl(WorkerFunctions* functions,
                    std::function<void(const std::string&)> on_shutdown);

  grpc::Status RunFunction(grpc::ServerContext* context, const RunFunctionRequest* request,
                           RunFunctionResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const FunctionWorkerStatusRequest* request,
                         FunctionWorkerStatusResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const ShutdownRequest* request,
                        ShutdownResponse* response) override;

 private:
  WorkerFunctions* const functions_;  // Not owned.
  const std::function<void(const std::string&)> on_shutdown_;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_RPC_WORKER_SERVICE_H_
