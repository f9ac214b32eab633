#ifndef PSTRAIN_PSTRAIN_INTERNAL_PS_TASK_H_
#define PSTRAIN_PSTRAIN_INTERNAL_PS_TASK_H_

// A ps task of a custom loop under parameter_server (role_task.h): serves its
// VariableStore (ps_server/rpc/ps_service.h) until the chief's Shutdown, or until the
// chief has not answered for chief_timeout. The composition root of the library's ps: it
// wires the store to its gRPC adapter, as ps_server/ps_task.cc does for the daemon, and
// keeps the daemon's counters (ps_server/ps_metrics.h: GetStatus reports the bytes pushed
// and pulled), which it logs as its final status when it stops serving.
//
// Thread-safety: as RoleTask.

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "grpcpp/grpcpp.h"
#include "common/metrics/metrics_registry.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/variable_store.h"
#include "pstrain/internal/function_runner.h"
#include "pstrain/internal/role_task.h"
#include "pstrain/internal/task_server.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

class PsTask final : public RoleTask {
 public:
  // Serves the store on this task's TF_CONFIG port with `credentials` (null: plaintext).
  // Errors: as TaskServer::Start.
  static absl::StatusOr<std::unique_ptr<PsTask>> Start(
      const StrategyOptions& options, TfConfig config,
      std::shared_ptr<grpc::ServerCredentials> credentials);
  // Stops serving.
  ~PsTask() override = default;

  const TfConfig& config() const override { return config_; }
  // Only counts what the program registers: a ps runs no function.
  FunctionRunner* function_runner() override { return &registered_; }
  absl::Status Serve() override;

 private:
  explicit PsTask(TfConfig config) : config_(std::move(config)) {}

  const TfConfig config_;
  FunctionRunner registered_;
  VariableStore store_;
  // Not served over HTTP: read by GetStatus and the final status line.
  MetricsRegistry metrics_registry_;
  PsMetrics metrics_{&metrics_registry_, &store_};
  std::unique_ptr<grpc::Service> service_;
  // Last: stops serving before the service and the store it reaches go.
  std::unique_ptr<TaskServer> server_;
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_PS_TASK_H_
