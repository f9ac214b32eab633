// ps_server: a parameter-server task. Holds a shard of the model's variables and applies
// the gradients workers push. Configured by TF_CONFIG (or --cluster/--task_type/--task_index).

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/daemon_flags.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/shutdown_signal.h"
#include "ps_server/ps_task.h"

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(argc, argv,
      "pstrain parameter-server task.\n"
      "  TF_CONFIG='{\"cluster\":{...},\"task\":{\"type\":\"ps\",\"index\":0}}' ps_server");
  // Tensors travel in messages of hundreds of KiB to MiBs, allocated per request.
  pstrain::KeepLargeBlocksInHeap();
  absl::StatusOr<pstrain::DaemonOptions> options = pstrain::DaemonOptionsFromFlags("ps");
  if (!options.ok()) {
    std::fprintf(stderr, "ps_server: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  pstrain::SetLogTag(absl::StrCat("ps", options->config.task.index));
  pstrain::ShutdownSignal shutdown;
  pstrain::ShutdownSignal::InstallHandlers(&shutdown);
  return pstrain::RunPsTask(*options, &shutdown);
}
