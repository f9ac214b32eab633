#ifndef PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_CLUSTER_H_
#define PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_CLUSTER_H_

// What one task of a custom loop under the parameter_server strategy serves and talks
// to, from TF_CONFIG (a chief, one or more ps, one or more workers; every task runs the
// same program). The composition root of the custom loop's parameter-server side: it
// wires the cores (ps_server/variable_store.h, FunctionRunner, ClosureScheduler) to
// their gRPC adapters.
//
//   ps      serves its VariableStore (ps_server/rpc/ps_service.h) until the chief's
//           Shutdown, or until the chief has not answered for chief_timeout
//   worker  serves the functions it registered (FunctionWorkerService), likewise
//   chief   serves a health service its tasks watch; holds a PsClient per ps and the
//           ClosureScheduler over the workers; keeps the job's membership
//           (distribute/membership.h, the chief daemon's too), fed by its polls of the ps
//           tasks and workers and by the scheduler's lost workers; tells every task to
//           exit when destroyed
//
// Thread-safety: built and destroyed by one thread; the accessors may be used from any.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/cluster_spec.h"
#include "common/rpc/grpc_util.h"
#include "proto/chief.pb.h"
#include "proto/health.grpc.pb.h"
#include "ps_server/ps_client.h"
#include "ps_server/variable_store.h"
#include "distribute/closure_scheduler.h"
#include "distribute/membership.h"
#include "distribute/watched_worker.h"
#include "pstrain/internal/function_runner.h"
#include "pstrain/internal/function_worker_client.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

class ParameterServerCluster {
 public:
  // Starts this task's server on its TF_CONFIG port, with the job's authorization and TLS
  // (task_security.h: every call needs the token or a certificate, and the role the
  // method is for: the chief's RunFunction and Shutdown, the workers' Push and Pull).
  // Errors: INVALID_ARGUMENT a cluster without a chief, a ps or a worker, a task of
  // another type (an evaluator), or SecureTask's (no token, certificate or insecure);
  // UNAVAILABLE the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<ParameterServerCluster>> Start(
      const StrategyOptions& options, TfConfig config);
  // The chief tells every worker, then every ps, to exit (best effort, each bounded by
  // rpc_timeout), unless LeaveTasksRunning() was called. Every task then stops serving.
  ~ParameterServerCluster();

  // Chief: the destructor tells no task to exit, so they keep their state for a chief
  // restarted from a checkpoint (preemption); they leave by themselves if none comes
  // back within their chief_timeout.
  void LeaveTasksRunning() { leave_tasks_running_ = true; }

  const TfConfig& config() const { return config_; }
  const StrategyOptions& options() const { return options_; }
  // This task's role, parsed once from TF_CONFIG (a chief, a ps or a worker).
  Role role() const { return config_.task.type; }
  int num_ps() const { return config_.cluster.num_tasks("ps"); }
  int num_workers() const { return config_.cluster.num_tasks("worker"); }

  // Chief and workers: one client per ps task, in index order (not owned by the caller).
  std::vector<PsClient*> ps_clients() const;
  // Chief: waits until every ps answers, up to startup_timeout.
  // Errors: UNAVAILABLE naming the ps tasks that did not.
  absl::Status WaitForPs();
  // Chief: the scheduler over the workers (made on the first call).
  ClosureScheduler* scheduler() ABSL_LOCKS_EXCLUDED(mu_);
  // Chief: what the scheduler calls when a function failed because a ps did (the
  // strategy's ps recovery, set once the variables exist); without it a failed ps fails
  // Join, naming it. Takes effect for a scheduler made after the call.
  void set_recover_ps(std::function<absl::Status()> recover_ps) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    recover_ps_ = std::move(recover_ps);
  }
  // Chief: who is registered, alive, lost (distribute/membership.h's rules): a ps or
  // worker is registered when it first answers a poll, lost when the scheduler loses it,
  // and back when it answers again.
  const Membership& membership() const { return membership_; }
  // Chief: the workers, in index order, as the scheduler's closures reach them.
  std::vector<FunctionWorkerClient*> worker_clients() const;
  // Chief: the placement fingerprint every scheduled function carries.
  void set_placement_fingerprint(uint64_t fingerprint) { placement_fingerprint_ = fingerprint; }
  uint64_t placement_fingerprint() const { return placement_fingerprint_; }

  // Workers: what the chief's functions run.
  FunctionRunner* function_runner() { return &runner_; }

  // ps and workers: serves until the chief says the job is done (OK), or the chief has
  // not answered its health service for chief_timeout (startup_timeout before it first
  // did). Errors: UNAVAILABLE naming the chief; FAILED_PRECONDITION on the chief.
  absl::Status Serve();

 private:
  ParameterServerCluster(const StrategyOptions& options, TfConfig config);
  absl::Status StartTaskServer();
  // One health check of the chief (Serve's thread only). Errors: the transport's, or
  // UNAVAILABLE when it is not serving.
  absl::Status CheckChief();
  std::string ChiefName() const;

  const StrategyOptions options_;
  const TfConfig config_;
  std::vector<std::unique_ptr<PsClient>> ps_;  // chief and workers
  // ps
  VariableStore store_;
  // workers
  FunctionRunner runner_;
  // chief
  std::vector<std::unique_ptr<FunctionWorkerClient>> workers_;
  Membership membership_;
  uint64_t placement_fingerprint_ = 0;
  std::atomic<bool> leave_tasks_running_{false};
  absl::Mutex mu_;
  // The workers as the scheduler sees them: their Ready polls feed membership_.
  std::vector<std::unique_ptr<WatchedWorker>> watched_workers_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ClosureScheduler> scheduler_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status()> recover_ps_ ABSL_GUARDED_BY(mu_);

  std::shared_ptr<grpc::ServerCredentials> credentials_;  // null: --insecure
  std::unique_ptr<grpc::Service> service_;  // this task's service (none on the chief)
  RunningServer server_;
  absl::Notification shutdown_;  // a Shutdown RPC arrived
  std::unique_ptr<grpc::health::v1::Health::Stub> chief_health_;  // Serve's thread only
};

// A fingerprint of a placement (its entries in order), equal on every task that placed
// the same variables the same way.
uint64_t PlacementFingerprint(const std::vector<VariablePlacementEntry>& placement);

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_PARAMETER_SERVER_CLUSTER_H_
