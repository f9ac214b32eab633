#ifndef PSTRAIN_WORKER_WORKER_CLIENT_H_
#define PSTRAIN_WORKER_WORKER_CLIENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/worker.pb.h"

namespace pstrain {

// A connection to one worker task, as the chief sees it. Implementation: gRPC
// (worker/rpc/grpc_worker_client.h). Errors start with name(). Thread-safe.
class WorkerClient {
 public:
  virtual ~WorkerClient() = default;
  // "worker task 1 (host:port)".
  virtual std::string name() const = 0;
  virtual absl::StatusOr<RunStepsResponse> RunSteps(const RunStepsRequest& request) = 0;
  virtual absl::StatusOr<WorkerStatusResponse> GetStatus() = 0;
  virtual absl::Status Shutdown(const std::string& reason) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_WORKER_CLIENT_H_
