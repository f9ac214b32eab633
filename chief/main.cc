// chief: coordinates a pstrain job. Waits for every ps and worker task, creates the
// variables, hands out work, prints one line per epoch and shuts the cluster down.
// Configured by TF_CONFIG (or --cluster/--task_type/--task_index) and --job.

#include "chief/chief_flags.h"
#include "common/daemon/daemon_runtime.h"

int main(int argc, char** argv) {
  return pstrain::RunDaemon(
      argc, argv,
      {"chief",
       "pstrain chief: coordinates training.\n"
       "  TF_CONFIG='{\"cluster\":{...},\"task\":{\"type\":\"chief\",\"index\":0}}' "
       "chief --job=examples/seed_synthetic.json",
       {{pstrain::Role::kChief}}, pstrain::RunChiefFromFlags});
}
