#ifndef PSTRAIN_PSTRAIN_INTERNAL_TASK_SERVER_H_
#define PSTRAIN_PSTRAIN_INTERNAL_TASK_SERVER_H_

// What every role of a custom loop under parameter_server shares (role_task.h): this
// task's gRPC server on its TF_CONFIG port, with the job's credentials and the default
// health service (the chief's is what its tasks watch), and, for a ps or a worker, the
// wait that ends when the chief says the job is done or stops answering.
//
// Thread-safety: Start and the destructor from the owner's thread; the shutdown callback
// from any (a service's handler); WaitForChief from one thread at a time.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "common/cluster_spec.h"
#include "common/rpc/grpc_util.h"
#include "grpcpp/grpcpp.h"
#include "proto/health.grpc.pb.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

class TaskServer {
 public:
  // Not serving yet: the services to serve are made with shutdown_callback() first.
  TaskServer(const StrategyOptions& options, const TfConfig& config);
  // Stops serving (in-flight calls get a second).
  ~TaskServer();

  TaskServer(const TaskServer&) = delete;
  TaskServer& operator=(const TaskServer&) = delete;

  // What a service's Shutdown RPC calls (with the chief's reason): WaitForChief then
  // returns OK. Valid while this server is.
  std::function<void(const std::string&)> shutdown_callback();

  // Serves `services` (not owned; they must outlive this server; none on the chief) on
  // this task's port, with `credentials` (null: plaintext, --insecure).
  // Errors: INVALID_ARGUMENT the task's address; UNAVAILABLE the port cannot be bound.
  absl::Status Start(std::vector<grpc::Service*> services,
                     std::shared_ptr<grpc::ServerCredentials> credentials);

  // ps and workers: waits until a Shutdown RPC came (OK), or the chief has not answered
  // its health service for chief_timeout (startup_timeout before it first did).
  // Errors: UNAVAILABLE naming the chief.
  absl::Status WaitForChief();

 private:
  // One health check of the chief (WaitForChief's thread only). Errors: the transport's,
  // or UNAVAILABLE when it is not serving.
  absl::Status CheckChief();
  std::string ChiefName() const;

  const StrategyOptions options_;
  const TfConfig config_;
  RunningServer server_;
  absl::Notification shutdown_;  // a Shutdown RPC arrived
  std::unique_ptr<grpc::health::v1::Health::Stub> chief_health_;  // WaitForChief's thread
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_TASK_SERVER_H_
