#ifndef PSTRAIN_PSTRAIN_INTERNAL_ROLE_TASK_H_
#define PSTRAIN_PSTRAIN_INTERNAL_ROLE_TASK_H_

// One task of a custom loop under the parameter_server strategy, as its role runs it
// (a chief, one or more ps, one or more workers; every task runs the same program). Each
// role is a class of its own, composed in its own file: chief_task.h, worker_task.h,
// ps_task.h; start_role_task.h picks the one TF_CONFIG's task type names. Starting is the
// class's Start, stopping its destructor.
//
// Thread-safety: built and destroyed by one thread; the accessors may be used from any.

#include "absl/status/status.h"
#include "common/cluster_spec.h"
#include "pstrain/internal/function_runner.h"

namespace pstrain::distribute::internal {

class ChiefTask;
class WorkerTask;

class RoleTask {
 public:
  virtual ~RoleTask() = default;

  // The cluster and this task, from TF_CONFIG; task.type is the role of this class.
  virtual const TfConfig& config() const = 0;
  Role role() const { return config().task.type; }
  int num_ps() const { return config().cluster.num_tasks(Role::kPs); }
  int num_workers() const { return config().cluster.num_tasks(Role::kWorker); }

  // The functions and per-worker iterators this program registered (ClusterCoordinator):
  // every task registers the same ones in the same order, so the chief names them by
  // index; only a worker runs them, when the chief asks.
  virtual FunctionRunner* function_runner() = 0;

  // ps and workers: serves until the chief says the job is done (OK), or the chief has
  // not answered its health service for chief_timeout (startup_timeout before it first
  // did). Errors: UNAVAILABLE naming the chief; FAILED_PRECONDITION on the chief.
  virtual absl::Status Serve() = 0;

  // This task as the chief's or a worker's class, null when it is another role: what
  // only that role has (the scheduler, the ps clients a worker pushes through).
  virtual ChiefTask* chief() { return nullptr; }
  virtual WorkerTask* worker() { return nullptr; }
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_ROLE_TASK_H_
