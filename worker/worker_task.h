#ifndef PSTRAIN_WORKER_WORKER_TASK_H_
#define PSTRAIN_WORKER_WORKER_TASK_H_

#include <string>

#include "absl/time/time.h"
#include "common/daemon/daemon_runtime.h"

namespace pstrain {

// Runs one worker task until shutdown: serves the Worker service through `runtime` (not
// owned), registers with the chief, builds the job the chief sends and runs the steps it
// is given. Returns the exit code: 0 after a Shutdown RPC, the chief's end of
// job or SIGTERM; 1 when the chief is lost or the job cannot be built; 2 for a cluster
// spec with no chief or no port for the task, or an unusable device.
// Requesting runtime->shutdown() stops the task.
// `device` chooses where gradients are computed: "cpu", "auto", "cuda" or "cuda:N"
// (common/math/backend_factory.h); a device that cannot be used is exit code 2.
// `step_delay` (tests only) makes the worker sleep after every step: a straggler.
int RunWorkerTask(DaemonRuntime* runtime, const std::string& device,
                  absl::Duration step_delay = absl::ZeroDuration());

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_WORKER_TASK_H_
