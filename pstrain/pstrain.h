#ifndef PSTRAIN_PSTRAIN_PSTRAIN_H_
#define PSTRAIN_PSTRAIN_PSTRAIN_H_

// pstrain's public C++ API for a training loop of one's own: the one header a program
// includes (Bazel: deps = ["//pstrain"]). It is tf.distribute's custom-training-loop API
// in C++, under the names TensorFlow uses; examples/custom_loop.cc runs one step function
// under every strategy, and README.md shows it next to the Python.
//
//   TensorFlow                                        pstrain::distribute
//   tf.distribute.MirroredStrategy() etc.             CreateStrategy({.strategy = StrategyKind::kMirrored})
//   strategy.num_replicas_in_sync                     strategy->num_replicas_in_sync()
//   with strategy.scope(): model, optimizer           strategy->CreateModel(ModelOptions)
//   strategy.experimental_distribute_dataset(ds)      strategy->ExperimentalDistributeDataset
//   for x in dist_dataset / next(iterator)            dataset->MakeIterator(epoch), it->Next()
//   strategy.run(step_fn, args=(x,))                  strategy->Run(step_fn, batch)
//   tape.gradient(loss, model.trainable_variables)    model->ComputeGradients(ctx, slice)
//   optimizer.apply_gradients(zip(grads, vars))       model->ApplyGradients(ctx, grads)
//   strategy.reduce(SUM, per_replica, axis=None)      strategy->Reduce(ReduceOp::kSum, pr)
//   model.fit(x, epochs=..., callbacks=[...])         Fit(job, data, strategy.get(), options)
//   ClusterCoordinator(strategy)                      ClusterCoordinator::Create(strategy)
//   coordinator.create_per_worker_dataset(fn)         coordinator->CreatePerWorkerIterator(fn)
//   coordinator.schedule(fn, args=(it,))              coordinator->Schedule(fn, it)
//   coordinator.join(), remote_value.fetch()          coordinator->Join(), value.Fetch()
//   server.join() on ps (and worker) tasks            strategy->JoinServer(),
//                                                     coordinator->Serve() (workers)
//   CheckpointManager(ckpt, dir).save()               strategy->Save(dir, progress)
//   ckpt.restore(manager.latest_checkpoint)           strategy->Restore(dir)
//   PreemptionCheckpointHandler (SIGTERM)             PreemptionWatcher::Watch(),
//                                                     PreemptionWatcher::Preempted()
//
// The strategies (TF_CONFIG, in TensorFlow's format, says the cluster and this task):
//
//   default                one replica, this process
//   mirrored               one replica per local device (StrategyOptions::devices), one
//                          thread each, in lockstep; one copy of the variables
//   multi_worker_mirrored  one replica per worker process (TF_CONFIG's chief, if any,
//                          then its workers), all-reducing the gradients every step
//   parameter_server       variables sharded over the ps tasks, whose optimizer applies
//                          each worker's gradients asynchronously; the chief schedules
//                          functions on the workers through a ClusterCoordinator
//
// Every task of a multi-process job runs the same program (as with TensorFlow, where
// every task runs the same script): under parameter_server a ps task serves
// (JoinServer), a worker registers the same functions as the chief and serves them
// (ClusterCoordinator::Serve, see pstrain/cluster_coordinator.h), the chief runs the loop.
//
// Fit (pstrain/fit.h: Keras's model.fit, what `train` runs) is one user of this API, as
// Keras's fit is of tf.distribute: its model comes from strategy->CreateModel, its data
// from ExperimentalDistributeDataset, each step is strategy->Run of ComputeGradients and
// ApplyGradients, and the epoch's figures go through Reduce; so a custom loop takes
// exactly Fit's synchronous step.
//
// A program parses its flags with ParseCommandLineWithUsage (common/daemon/command_line.h),
// as pstrain's own binaries do: --help lists them and exits 0, --version says what was built.
//
// Errors are absl::Status throughout; PS_RETURN_IF_ERROR and PS_ASSIGN_OR_RETURN
// (common/status_macros.h) propagate them.

#include "common/daemon/command_line.h"
#include "common/data/dataset.h"
#include "common/model/model.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "common/training/epoch_summary.h"
#include "common/training/evaluator.h"
#include "pstrain/cluster_coordinator.h"
#include "pstrain/create_strategy.h"
#include "pstrain/distributed_model.h"
#include "pstrain/fit.h"
#include "pstrain/job_file.h"
#include "pstrain/preemption.h"
#include "pstrain/replica.h"
#include "pstrain/strategy.h"
#include "pstrain/value_codec.h"

namespace pstrain::distribute {

using ::pstrain::Dataset;           // features [N, F] and labels, in memory
using ::pstrain::EpochSummary;      // an epoch's figures, and
using ::pstrain::EvaluationResult;  // loss, accuracy, samples of an evaluation
using ::pstrain::Fit;               // Keras's model.fit on a Strategy (pstrain/fit.h),
using ::pstrain::FitOptions;        // its callbacks and restore state,
using ::pstrain::FitResult;         // and its history and final weights
using ::pstrain::FormatEpochLine;   // the Keras-style line every pstrain trainer prints
using ::pstrain::StepResult;        // loss sum, correct predictions and samples of a step
using ::pstrain::Tensor;

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_PSTRAIN_H_
