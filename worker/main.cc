// worker: a worker task. Computes gradients on its shard of the data and pushes them
// to the ps tasks. Configured by TF_CONFIG (or --cluster/--task_type/--task_index).

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/daemon_flags.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/shutdown_signal.h"
#include "worker/worker_task.h"

ABSL_FLAG(std::string, device, "auto",
          "Where to compute: cpu, auto (a CUDA GPU when one answers, else the CPU), cuda, cuda:N");
ABSL_FLAG(absl::Duration, testing_step_delay, absl::ZeroDuration(),
          "Fault injection for tests: sleep this long after every training step (a straggler)");

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(argc, argv,
      "pstrain worker task.\n"
      "  TF_CONFIG='{\"cluster\":{...},\"task\":{\"type\":\"worker\",\"index\":0}}' worker");
  // Tensors travel in messages of hundreds of KiB to MiBs, allocated per request.
  pstrain::KeepLargeBlocksInHeap();
  absl::StatusOr<pstrain::DaemonOptions> options = pstrain::DaemonOptionsFromFlags("worker");
  if (!options.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  pstrain::SetLogTag(absl::StrCat("worker", options->config.task.index));
  pstrain::ShutdownSignal shutdown;
  pstrain::ShutdownSignal::InstallHandlers(&shutdown);
  return pstrain::RunWorkerTask(*options, absl::GetFlag(FLAGS_device), &shutdown,
                                absl::GetFlag(FLAGS_testing_step_delay));
}
