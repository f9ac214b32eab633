#ifndef PSTRAIN_PS_SERVER_PS_TASK_H_
#define PSTRAIN_PS_SERVER_PS_TASK_H_

#include "common/daemon/daemon_runtime.h"

namespace pstrain {

// Runs one ps task until shutdown: serves the ParameterServer service through `runtime`
// (not owned), registers with the chief and heartbeats. Returns the process exit code:
// 0 after a Shutdown RPC, the chief's end of job or SIGTERM; 1 when the chief is lost or
// the address cannot be bound; 2 when the cluster spec has no chief or no port for the
// task. Requesting runtime->shutdown() stops the task.
int RunPsTask(DaemonRuntime* runtime);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_PS_TASK_H_
