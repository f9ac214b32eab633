// train: trains a job spec in this process (train/train_task.h says how). --metrics_port
// serves Prometheus metrics and a live dashboard; --logdir writes TensorBoard event files
// (train/train_monitoring.h).
//
//   train --job=examples/fashion_mnist.json [--epochs=N] [--device=cpu|auto|cuda[:N]]
//         [--strategy=default|mirrored|multi_worker_mirrored] [--checkpoint_dir=DIR]

#include "common/daemon/daemon_runtime.h"
#include "train/train_task.h"

int main(int argc, char** argv) {
  return pstrain::RunDaemon(
      argc, argv,
      {"train",
       "Trains a job spec in this process.\n"
       "  train --job=FILE [--epochs=N] [--device=cpu|auto|cuda[:N]]\n"
       "        [--strategy=default|mirrored|multi_worker_mirrored] [--devices=cpu:0,cpu:1]\n"
       "        [--checkpoint_dir=DIR] [--keep_checkpoints=3] [--restore=latest|none|PATH]\n"
       "        [--export_keras=PATH.keras]",
       {{pstrain::Role::kChief, pstrain::Role::kWorker}, /*cluster_optional=*/true},
       pstrain::RunTrainTask});
}
