#ifndef PSTRAIN_CHIEF_TASK_RUNTIME_H_
#define PSTRAIN_CHIEF_TASK_RUNTIME_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chief/chief_client.h"
#include "chief/task_agent.h"
#include "common/daemon_options.h"
#include "common/rpc/grpc_util.h"
#include "common/shutdown_signal.h"

namespace pstrain {

// What every ps and worker task does around its own service: serve it (with health and
// reflection) on the task's port, register with the chief, heartbeat, and on shutdown
// stop serving and report the exit code. The task's own logic sits between Register()
// and WaitAndStop().
class TaskRuntime {
 public:
  // Starts serving `services` (not owned; they must outlive the runtime).
  // Errors: INVALID_ARGUMENT/NOT_FOUND for a cluster spec without this task's port or a
  //         chief; UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<TaskRuntime>> Start(const DaemonOptions& options,
                                                            std::vector<grpc::Service*> services,
                                                            ShutdownSignal* shutdown);

  // Registers with the chief (see TaskAgent::Register). On failure the shutdown signal is
  // already requested with exit code 1 and the reason.
  absl::StatusOr<RegisterTaskResponse> Register();
  void StartHeartbeats() { agent_->StartHeartbeats(); }
  ChiefClient* chief() { return chief_.get(); }

  // Waits for the shutdown signal, stops serving (giving in-flight calls 2 s) and returns
  // the exit code the signal carries.
  int WaitAndStop();

 private:
  TaskRuntime() = default;

  DaemonOptions options_;
  ShutdownSignal* shutdown_ = nullptr;  // Not owned.
  RunningServer server_;
  std::unique_ptr<ChiefClient> chief_;
  std::unique_ptr<TaskAgent> agent_;
};

// The exit code for a TaskRuntime::Start error: 1 when the port could not be bound (a
// runtime problem, worth a restart), 2 when the cluster spec itself is wrong (no restart
// will help), as for a malformed TF_CONFIG.
int ExitCodeForStartError(const absl::Status& status);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_TASK_RUNTIME_H_
