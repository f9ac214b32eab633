#ifndef PSTRAIN_COMMON_DAEMON_TASK_AGENT_H_
#define PSTRAIN_COMMON_DAEMON_TASK_AGENT_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "common/daemon/chief_client.h"
#include "common/daemon/shutdown_signal.h"

namespace pstrain {

// The chief's agent inside every ps and worker task (TensorFlow's coordination-service
// agent): registers the task, then heartbeats in the background. When the chief says the
// job is over the agent requests a clean shutdown (exit 0); when the chief stays
// unreachable for longer than `chief_timeout` it requests exit 1 naming the chief, so no
// task lingers after its job. A chief restarted within that time is re-attached to: the
// task registers again when its heartbeat is not recognised.
class TaskAgent {
 public:
  struct Options {
    Role role = Role::kWorker;  // sent as its TF_CONFIG name (RoleName)
    int task_index = 0;
    std::string address;
    absl::Duration register_timeout = absl::Seconds(60);
    absl::Duration heartbeat_interval = absl::Seconds(1);
    absl::Duration chief_timeout = absl::Seconds(30);
  };

  // `chief` and `shutdown` are not owned and must outlive the agent.
  TaskAgent(Options options, ChiefClient* chief, ShutdownSignal* shutdown);
  ~TaskAgent();  // Stops and joins the heartbeat thread.

  // Registers, retrying until the chief answers or register_timeout passes; gives up
  // early if `shutdown` is requested meanwhile.
  // Errors: DEADLINE_EXCEEDED naming the chief and its last error; CANCELLED on shutdown;
  //         INVALID_ARGUMENT when the chief rejects this task (not in its cluster spec).
  absl::StatusOr<RegisterTaskResponse> Register();

  // Starts the heartbeat thread. Call after a successful Register().
  void StartHeartbeats();

  int64_t incarnation() const { return incarnation_; }

 private:
  RegisterTaskRequest RegisterRequest() const;
  // Heartbeats until shutdown; a NOT_FOUND answer (a restarted chief that does not know
  // this task) is met by registering again.
  void HeartbeatLoop();

  const Options options_;
  ChiefClient* const chief_;       // Not owned.
  ShutdownSignal* const shutdown_; // Not owned.
  const int64_t incarnation_;
  ShutdownSignal stop_heartbeats_;
  std::thread heartbeat_thread_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_TASK_AGENT_H_
