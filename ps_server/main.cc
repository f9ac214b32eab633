// ps_server: a parameter-server task. Holds a shard of the model's variables and applies
// the gradients workers push. Configured by TF_CONFIG (or --cluster/--task_type/--task_index).

#include "common/daemon/daemon_runtime.h"
#include "ps_server/ps_task.h"

int main(int argc, char** argv) {
  return pstrain::RunDaemon(
      argc, argv,
      {"ps_server",
       "pstrain parameter-server task.\n"
       "  TF_CONFIG='{\"cluster\":{...},\"task\":{\"type\":\"ps\",\"index\":0}}' ps_server",
       {{pstrain::Role::kPs}}, pstrain::RunPsTask});
}
