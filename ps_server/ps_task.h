#ifndef PSTRAIN_PS_SERVER_PS_TASK_H_
#define PSTRAIN_PS_SERVER_PS_TASK_H_

#include "common/daemon_options.h"
#include "common/shutdown_signal.h"

namespace pstrain {

// Runs one ps task until shutdown: serves the ParameterServer service (with health and
// reflection), registers with the chief and heartbeats. Returns the process exit code:
// 0 after a Shutdown RPC, the chief's end of job or SIGTERM; 1 when the chief is lost or
// the port cannot be bound; 2 when the cluster spec has no chief or no port for the task. `shutdown` is not owned; requesting it stops the task.
int RunPsTask(const DaemonOptions& options, ShutdownSignal* shutdown);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_PS_TASK_H_
