#ifndef PSTRAIN_WORKER_RPC_GRPC_WORKER_CLIENT_H_
#define PSTRAIN_WORKER_RPC_GRPC_WORKER_CLIENT_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "worker/worker_client.h"

namespace pstrain {

// A WorkerClient over gRPC, speaking the FunctionWorker service: RunSteps runs the
// worker's function "pstrain.train_chunk". RunSteps carries `run_steps_timeout` as its
// deadline (it trains many batches); the other calls carry `timeout`.
std::unique_ptr<WorkerClient> CreateGrpcWorkerClient(int worker_index, const std::string& address,
                                                     absl::Duration timeout,
                                                     absl::Duration run_steps_timeout);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_RPC_GRPC_WORKER_CLIENT_H_
