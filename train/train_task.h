#ifndef PSTRAIN_TRAIN_TRAIN_TASK_H_
#define PSTRAIN_TRAIN_TRAIN_TASK_H_

#include "common/daemon/daemon_runtime.h"

namespace pstrain {

// train's body (train/main.cc): trains the job spec of --job in this process,
// printing Keras-style epoch lines on stdout and, when stderr is a terminal, a progress
// bar there.
//
//   --strategy=default                one replica in this process (TensorFlow's default)
//   --strategy=mirrored [--devices=cpu:0,cpu:1|cuda:0,cuda:1]
//                                     K replicas in lockstep, one thread per device
//   --strategy=multi_worker_mirrored  this process is one worker of a synchronous cluster
//                                     read from TF_CONFIG (the chief, if any, then the
//                                     workers are the ring's ranks); gradients are ring
//                                     all-reduced over gRPC on the task's port (served
//                                     through `runtime`, with health and reflection); only
//                                     rank 0 prints epoch lines
//     [--collective=auto|ring|nccl]   auto: NCCL when the binary was built with CUDA and
//                                     every worker runs on a CUDA device (agreed over the
//                                     ring), else the gRPC ring; nccl when that is not
//                                     possible: exit 2
//   --checkpoint_dir=DIR [--keep_checkpoints=3] [--restore=latest|none|PATH]
//                                     a checkpoint per epoch (so also at the end), written
//                                     by this process, or in a multi-worker job by rank 0
//                                     only (as TensorFlow's chief); a job continues from
//                                     --restore (default: the newest good one in DIR).
//                                     Rank 0 reads it and sends it through the ring, so
//                                     only rank 0 needs DIR.
//   --export_keras=PATH.keras         the trained model as a Keras 3 .keras file at the
//                                     end (rank 0 only in a multi-worker job)
//
// SIGTERM/SIGINT: training stops at the end of the epoch in progress, whose checkpoint is
// written, and train exits 42 (a restart resumes from it); 0 when that was the last epoch.
// Returns the exit code: 0 trained; 2 bad flags, TF_CONFIG, job spec or data (one line on
// stderr); 1 a failure while training (e.g. a peer worker died: named in the message);
// 42 stopped by a signal before the last epoch.
int RunTrainTask(DaemonRuntime* runtime);

}  // namespace pstrain

#endif  // PSTRAIN_TRAIN_TRAIN_TASK_H_
