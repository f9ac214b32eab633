// chief: coordinates a pstrain job. Waits for every ps and worker task, creates the
// variables, hands out work, prints one line per epoch and shuts the cluster down.
// Configured by TF_CONFIG (or --cluster/--task_type/--task_index) and --job. Under
// TF_CONFIG's "evaluator" it evaluates every new checkpoint in --checkpoint_dir instead
// (chief/evaluator_task.h).

#include "chief/chief_flags.h"
#include "common/daemon/daemon_runtime.h"

int main(int argc, char** argv) {
  return pstrain::RunDaemon(
      argc, argv,
      {"chief",
       "pstrain chief: coordinates training.\n"
       "  TF_CONFIG='{\"cluster\":{...},\"task\":{\"type\":\"chief\",\"index\":0}}' "
       "chief --job=examples/seed_synthetic.json\n"
       "  TF_CONFIG='{\"cluster\":{...},\"task\":{\"type\":\"evaluator\",\"index\":0}}' "
       "chief --checkpoint_dir=DIR [--logdir=DIR] [--metrics_port=N]",
       {{pstrain::Role::kChief, pstrain::Role::kEvaluator}}, pstrain::RunChiefFromFlags});
}
