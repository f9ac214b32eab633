#ifndef PSTRAIN_PSTRAIN_FIT_H_
#define PSTRAIN_PSTRAIN_FIT_H_

// Keras's model.fit, written against the public Strategy (pstrain/strategy.h) as Keras's
// fit is against tf.distribute: one user of the API a custom loop uses (pstrain/pstrain.h),
// so a loop of one's own can do all it does. `train` runs it.
//
// The model is made by strategy->CreateModel, the data by ExperimentalDistributeDataset.
// Each step: the global batch (fit.batch_size) is split evenly across the strategy's
// replicas; strategy->Run calls the step on every replica of this process with its slice:
// DistributedModel::ComputeGradients (the gradient of the slice's mean loss) then
// ApplyGradients, and when Run returns the synchronous strategy has weighted each
// replica's gradients by its slice's share of the global batch, summed them (across
// worker processes too, one float all-reduce for every variable) and applied one update
// (see pstrain/distributed_model.h). Under a multi-worker strategy every worker process
// builds the same global batch (same data, same seed) and runs only its replicas' slices.
// The step's figures (loss sum, correct, samples) come back per replica and are added up
// here in replica order; at the epoch's end strategy->Reduce adds the other workers' (one
// more all-reduce per epoch), and DistributedModel::CheckInSync compares the weights'
// fingerprints, so all workers take the same updates and report the same figures.
//
// Each epoch: a Batcher over the training data, reshuffled with a seed derived from
// (job seed, epoch) when fit.shuffle, yields full passes (steps_per_epoch = 0) or exactly
// steps_per_epoch batches from a repeating stream; then the validation data, if any, is
// evaluated with dropout off in batches of batch_size.
//
// Job-spec keys read here (top level; ParseJobSpec keeps them in JobSpec::raw):
//   "scale_learning_rate": true  multiply the optimizer's learning rate by
//       num_replicas_in_sync (the linear scaling rule for a global batch that grows with
//       the replicas). Default false: the learning rate is used as written, as Keras does.
//   "one_hot_labels": true  turn class-id labels into one-hot rows when the data is
//       loaded (what keras.utils.to_categorical does in a Keras script), so losses that
//       want [N, K] targets (mse, categorical_crossentropy) can train on class-id sources
//       such as fashion_mnist. Default false.
//
// Determinism: for a given job (seed included) and replica count the figures and final
// weights are the same on every run; the prefetch thread does not change the order. The
// shuffle seed of an epoch and the dropout seed of a step depend only on their numbers, so
// a job continued from a TrainingState (FitOptions::restore) trains exactly as one that
// never stopped.
//
// Strategies: default, mirrored and multi_worker_mirrored (under parameter_server the
// chief schedules functions on the workers instead: pstrain/cluster_coordinator.h).
//
// Thread-safety: Fit() runs on the calling thread (plus the Batcher's prefetch thread and
// whatever the strategy's Run uses); callbacks are called on the calling thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/model/job_spec.h"
#include "common/tensor.h"
#include "common/training/epoch_summary.h"
#include "common/training/training_state.h"
#include "pstrain/strategy.h"

namespace pstrain {

struct FitData {
  std::shared_ptr<const Dataset> train;       // required
  std::shared_ptr<const Dataset> validation;  // null when the job has none
};

// Loads job.data.train (required) and job.data.validation (optional) with LoadDataset,
// relative paths against base_dir, and applies "one_hot_labels".
// Errors: INVALID_ARGUMENT for a missing data.train, a non-bool "one_hot_labels",
// one_hot_labels on data with unknown class count; LoadDataset's errors, prefixed with
// "data.train: " or "data.validation: ".
absl::StatusOr<FitData> LoadFitData(const JobSpec& job, const std::string& base_dir);

// Progress inside an epoch, for a progress bar.
struct BatchProgress {
  int epoch = 0;   // 1-based
  int epochs = 0;
  int64_t step = 0;   // 1-based, within the epoch
  int64_t steps = 0;  // steps this epoch will take
  double loss = 0;      // running mean over the epoch so far
  double accuracy = 0;  // running mean over the epoch so far
  int64_t global_step = 0;     // optimizer steps of the run, this one included
  int64_t samples = 0;         // examples of this step (every replica's)
  double step_loss = 0;        // this step's mean loss
  absl::Duration elapsed;      // since the epoch's start
};

struct FitOptions {
  // Overrides fit.epochs when > 0. (The replicas' devices and backends are the
  // strategy's: StrategyOptions::device and devices.)
  int epochs = 0;
  // Called after each epoch, validation included. Return false to stop training (Keras's
  // model.stop_training = True); the epoch just finished stays in the history.
  std::function<bool(const EpochSummary&)> on_epoch;
  // Called after every step (cheap: keep any drawing throttled on the caller's side).
  std::function<void(const BatchProgress&)> on_batch;
  // Batches the Batcher prepares ahead on its own thread.
  int prefetch = 2;
  // Continue from this state (not owned; null: fresh weights from the job's seed): values,
  // optimizer slots and iterations by variable name, the step count, and the next epoch
  // epochs_done + 1 (nothing trains when epochs_done >= epochs). A slot the state lacks
  // keeps its fresh value. Multi-worker strategies: only the process that runs replica 0
  // reads it and sends it to the others (DistributedModel::RestoreState), so only that
  // process needs the checkpoint (the others' `restore` is ignored); every process takes
  // part.
  const TrainingState* restore = nullptr;
  // Called on every process once a restored state is in place, before the first step.
  std::function<void(int epochs_done, int64_t global_step)> on_restored;
  // Called after each epoch's on_epoch (so also at the end of the job) with the whole
  // training state, e.g. to write a checkpoint; a non-OK status stops training and is
  // Fit's result. Set it on one process only: the others meanwhile wait in their next
  // collective.
  std::function<absl::Status(const TrainingState&)> on_checkpoint;
  // Multi-worker strategies: compare a fingerprint of the weights across workers every
  // this many steps (and before the first step and after every epoch); 0: only those.
  int64_t sync_check_every = 100;
};

struct FitResult {
  std::vector<EpochSummary> history;  // one per finished epoch
  std::vector<Tensor> weights;        // final weights, in variables() order
  int64_t steps = 0;                  // optimizer steps taken
  // Steps whose gradient held a NaN or an infinity and were dropped ("nonfinite": "skip").
  int64_t nonfinite_skipped = 0;
};

// Trains job.model on data.train under `strategy` (not owned), in a model of its own
// (strategy->CreateModel: every process of a multi-worker job calls Fit alike).
// Errors: INVALID_ARGUMENT for a missing strategy or a parameter_server one, epochs < 1, a non-bool
// "scale_learning_rate", data whose feature count or label shape does not fit the model
// and loss (with what would fix it), a batch smaller than the replica count, a restore
// state that lacks one of the model's variables, has another shape, or a slot the
// optimizer does not keep (named), a gradient holding a NaN or an infinity (named, with
// the step; unless the job's "nonfinite" is "skip", which drops such a step and counts it
// in nonfinite_skipped); FAILED_PRECONDITION (multi-worker) the process with
// replica 0 could not apply its restore state; on_checkpoint's errors;
// the errors of Model, Optimizer, Batcher, the backend factory and the strategy.
absl::StatusOr<FitResult> Fit(const JobSpec& job, const FitData& data,
                              distribute::Strategy* strategy, const FitOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_PSTRAIN_FIT_H_
