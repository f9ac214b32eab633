// worker: a worker task. Computes gradients on its shard of the data and pushes them
// to the ps tasks. Configured by TF_CONFIG (or --cluster/--task_type/--task_index).

#include "absl/flags/flag.h"
#include "common/daemon/daemon_runtime.h"
#include "worker/worker_task.h"

ABSL_FLAG(std::string, device, "auto",
          "Where to compute: cpu, auto (a CUDA GPU when one answers, else the CPU), cuda, cuda:N");
ABSL_FLAG(absl::Duration, testing_step_delay, absl::ZeroDuration(),
          "Fault injection for tests: sleep this long after every training step (a straggler)");

int main(int argc, char** argv) {
  return pstrain::RunDaemon(
      argc, argv,
      {"worker",
       "pstrain worker task.\n"
       "  TF_CONFIG='{\"cluster\":{...},\"task\":{\"type\":\"worker\",\"index\":0}}' worker",
       {{pstrain::Role::kWorker}}, [](pstrain::DaemonRuntime* runtime) {
         return pstrain::RunWorkerTask(runtime, absl::GetFlag(FLAGS_device),
                                       absl::GetFlag(FLAGS_testing_step_delay));
       }});
}
