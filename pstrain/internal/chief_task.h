#ifndef PSTRAIN_PSTRAIN_INTERNAL_CHIEF_TASK_H_
#define PSTRAIN_PSTRAIN_INTERNAL_CHIEF_TASK_H_

// The chief of a custom loop under parameter_server (role_task.h): serves a health
// service its tasks watch; holds a PsClient per ps and the ClosureScheduler over the
// workers; keeps the job's membership (distribute/membership.h, the chief daemon's too),
// fed by its polls of the ps tasks and workers and by the scheduler's lost workers; tells
// every task to exit when destroyed. The composition root of the library's chief: it
// makes the gRPC clients of the ps tasks and workers.
//
// Thread-safety: built and destroyed by one thread; the accessors may be used from any.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/cluster_spec.h"
#include "distribute/closure_scheduler.h"
#include "distribute/membership.h"
#include "distribute/watched_worker.h"
#include "grpcpp/grpcpp.h"
#include "ps_server/ps_client.h"
#include "pstrain/internal/function_runner.h"
#include "pstrain/internal/function_worker_client.h"
#include "pstrain/internal/role_task.h"
#include "pstrain/internal/task_server.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

class ChiefTask final : public RoleTask {
 public:
  // Makes a client per ps and per worker and serves the health service on this task's
  // TF_CONFIG port with `credentials` (null: plaintext).
  // Errors: as TaskServer::Start.
  static absl::StatusOr<std::unique_ptr<ChiefTask>> Start(
      const StrategyOptions& options, TfConfig config,
      std::shared_ptr<grpc::ServerCredentials> credentials);
  // Tells every worker, then every ps, to exit (best effort, each bounded by
  // rpc_timeout), unless LeaveTasksRunning() was called; then stops serving.
  ~ChiefTask() override;

  const TfConfig& config() const override { return config_; }
  // Only names what the program registers: the workers run the functions.
  FunctionRunner* function_runner() override { return &registered_; }
  // Errors: FAILED_PRECONDITION always: the chief runs the training loop.
  absl::Status Serve() override;
  ChiefTask* chief() override { return this; }

  // The destructor tells no task to exit, so they keep their state for a chief restarted
  // from a checkpoint (preemption); they leave by themselves if none comes back within
  // their chief_timeout.
  void LeaveTasksRunning() { leave_tasks_running_ = true; }

  // One client per ps task, in index order (owned by this task).
  std::vector<PsClient*> ps_clients() const;
  // Waits until every ps answers, up to startup_timeout.
  // Errors: UNAVAILABLE naming the ps tasks that did not.
  absl::Status WaitForPs();
  // The scheduler over the workers (made on the first call).
  ClosureScheduler* scheduler() ABSL_LOCKS_EXCLUDED(mu_);
  // What the scheduler calls when a function failed because a ps did (the strategy's ps
  // recovery, set once the variables exist); without it a failed ps fails Join, naming
  // it. Takes effect for a scheduler made after the call.
  void set_recover_ps(std::function<absl::Status()> recover_ps) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    recover_ps_ = std::move(recover_ps);
  }
  // Who is registered, alive, lost (distribute/membership.h's rules): a ps or worker is
  // registered when it first answers a poll, lost when the scheduler loses it, and back
  // when it answers again.
  const Membership& membership() const { return membership_; }
  // The workers, in index order, as the scheduler's closures reach them.
  std::vector<FunctionWorkerClient*> worker_clients() const;
  // The placement fingerprint every scheduled function carries.
  void set_placement_fingerprint(uint64_t fingerprint) { placement_fingerprint_ = fingerprint; }
  uint64_t placement_fingerprint() const { return placement_fingerprint_; }

 private:
  ChiefTask(const StrategyOptions& options, TfConfig config);

  const StrategyOptions options_;
  const TfConfig config_;
  FunctionRunner registered_;
  std::vector<std::unique_ptr<PsClient>> ps_;
  std::vector<std::unique_ptr<FunctionWorkerClient>> workers_;
  Membership membership_;
  std::atomic<uint64_t> placement_fingerprint_{0};
  std::atomic<bool> leave_tasks_running_{false};
  absl::Mutex mu_;
  // The workers as the scheduler sees them: their Ready polls feed membership_.
  std::vector<std::unique_ptr<WatchedWorker>> watched_workers_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ClosureScheduler> scheduler_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status()> recover_ps_ ABSL_GUARDED_BY(mu_);
  // Last: stops serving first.
  std::unique_ptr<TaskServer> server_;
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_CHIEF_TASK_H_
