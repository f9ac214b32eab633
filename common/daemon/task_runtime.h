#ifndef PSTRAIN_COMMON_DAEMON_TASK_RUNTIME_H_
#define PSTRAIN_COMMON_DAEMON_TASK_RUNTIME_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/daemon/chief_client.h"
#include "common/daemon/daemon_runtime.h"
#include "common/daemon/task_agent.h"

namespace pstrain {

// What every ps and worker task does around its own service, on top of its
// DaemonRuntime: serve it, register with the chief, heartbeat, and on shutdown stop
// serving and report the exit code. The task's own logic sits between Register() and
// WaitAndStop().
class TaskRuntime {
 public:
  // Serves `services` (not owned; they must outlive the runtime) through `daemon` (not
  // owned; must outlive the task runtime).
  // Errors: INVALID_ARGUMENT/NOT_FOUND for a cluster spec without this task's port or a
  //         chief; UNAVAILABLE when the address cannot be bound (named). ExitCodeFor
  //         (common/daemon/exit_codes.h) says how the task exits.
  static absl::StatusOr<std::unique_ptr<TaskRuntime>> Start(DaemonRuntime* daemon,
                                                            std::vector<grpc::Service*> services);

  // Registers with the chief (see TaskAgent::Register). On failure the shutdown signal is
  // already requested with exit code 1 and the reason.
  absl::StatusOr<RegisterTaskResponse> Register();
  void StartHeartbeats() { agent_->StartHeartbeats(); }
  ChiefClient* chief() { return chief_.get(); }

  // Waits for the shutdown signal, stops heartbeating and serving, and returns the exit
  // code the signal carries.
  int WaitAndStop();

 private:
  TaskRuntime() = default;

  DaemonRuntime* daemon_ = nullptr;  // Not owned.
  std::unique_ptr<ChiefClient> chief_;
  std::unique_ptr<TaskAgent> agent_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_TASK_RUNTIME_H_
