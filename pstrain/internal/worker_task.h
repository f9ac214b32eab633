#ifndef PSTRAIN_PSTRAIN_INTERNAL_WORKER_TASK_H_
#define PSTRAIN_PSTRAIN_INTERNAL_WORKER_TASK_H_

// A worker task of a custom loop under parameter_server (role_task.h): serves the
// functions it registered (FunctionWorkerService over its FunctionRunner) until the
// chief's Shutdown, or until the chief has not answered for chief_timeout, and pushes to
// the ps tasks through a client per ps. The composition root of the library's worker: it
// wires the runner to its gRPC adapter and makes the ps clients.
//
// Thread-safety: as RoleTask.

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "grpcpp/grpcpp.h"
#include "ps_server/ps_client.h"
#include "pstrain/internal/function_runner.h"
#include "pstrain/internal/role_task.h"
#include "pstrain/internal/task_server.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

class WorkerTask final : public RoleTask {
 public:
  // Makes a client per ps and serves the runner on this task's TF_CONFIG port with
  // `credentials` (null: plaintext); the runner takes functions once Serve is called.
  // Errors: as TaskServer::Start.
  static absl::StatusOr<std::unique_ptr<WorkerTask>> Start(
      const StrategyOptions& options, TfConfig config,
      std::shared_ptr<grpc::ServerCredentials> credentials);
  // Stops serving.
  ~WorkerTask() override = default;

  const TfConfig& config() const override { return config_; }
  // What the chief's functions run.
  FunctionRunner* function_runner() override { return &runner_; }
  // Takes functions until the chief says the job is done (see RoleTask::Serve).
  absl::Status Serve() override;
  WorkerTask* worker() override { return this; }

  // One client per ps task, in index order (owned by this task).
  std::vector<PsClient*> ps_clients() const;

 private:
  explicit WorkerTask(TfConfig config) : config_(std::move(config)) {}

  const TfConfig config_;
  std::vector<std::unique_ptr<PsClient>> ps_;
  FunctionRunner runner_;
  std::unique_ptr<grpc::Service> service_;
  // Last: stops serving before the service and the runner it reaches go.
  std::unique_ptr<TaskServer> server_;
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_WORKER_TASK_H_
