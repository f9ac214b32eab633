#ifndef PSTRAIN_PSTRAIN_INTERNAL_PS_TASK_H_
#define PSTRAIN_PSTRAIN_INTERNAL_PS_TASK_H_

// A ps task of a custom loop under parameter_server (role_task.h): serves the daemon's ps
// (ps_server/ps_instance.h: the same store, service and counters the ps daemon runs)
// until the chief's Shutdown, or until the chief has not answered for chief_timeout. The
// composition root of the library's ps: it serves that ps on this task's TaskServer, with
// the custom loop's credentials, and logs the ps's final status (GetStatus reports the
// bytes pushed and pulled) when it stops serving.
//
// Thread-safety: as RoleTask.

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "grpcpp/grpcpp.h"
#include "common/metrics/metrics_registry.h"
#include "ps_server/ps_instance.h"
#include "pstrain/internal/function_runner.h"
#include "pstrain/internal/role_task.h"
#include "pstrain/internal/task_server.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

class PsTask final : public RoleTask {
 public:
  // Serves a new ps on this task's TF_CONFIG port with `credentials` (null: plaintext).
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
  // Not served over HTTP: read by GetStatus and the final status line.
  MetricsRegistry metrics_registry_;
  std::unique_ptr<PsInstance> ps_;
  // Last: stops serving before the ps it reaches goes.
  std::unique_ptr<TaskServer> server_;
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_PS_TASK_H_
