#ifndef PSTRAIN_DISTRIBUTE_REPLICATED_MODEL_H_
#define PSTRAIN_DISTRIBUTE_REPLICATED_MODEL_H_

// A model as the synchronous strategies (default, mirrored, multi_worker_mirrored) train
// it, like TensorFlow's MirroredVariables: one host copy of every variable and its
// optimizer state, shared by this process's replicas and identical in every worker
// process, and one Model (with its Backend) per local replica to compute gradients on.
// Each step every replica computes the gradient of its slice's mean loss; ApplyGradients
// weights each by its slice's share of the global batch, sums the local ones in replica
// order (Strategy::Reduce, deterministic), sums across worker processes (one
// CrossWorkerSum for all variables), and applies one optimizer update, so all replicas
// everywhere take the same update of the global batch's mean loss.
//
// The public API's synchronous models (pstrain/internal/sync_strategy.h) train through
// this class, for a custom loop (pstrain/pstrain.h) and for Fit (pstrain/fit.h) alike:
// there is one synchronous training step in pstrain.
//
// Thread-safety: ComputeGradients(r) may run on replica r's thread while other replicas
// run theirs (each touches only its own Model and gradient buffer); every other method is
// called from the one training-loop thread, between steps.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/data/dataset.h"
#include "common/math/backend.h"
#include "common/model/loss.h"
#include "common/model/model.h"
#include "common/model/optimizer.h"
#include "common/tensor.h"
#include "common/training/evaluator.h"
#include "common/training/training_state.h"
#include "nlohmann/json.hpp"
#include "proto/ps.pb.h"
#include "distribute/strategy.h"

namespace pstrain {

struct ReplicatedModelOptions {
  nlohmann::json keras_model;  // what Keras's model.to_json() writes
  LossConfig loss;
  OptimizerConfig optimizer;  // its nonfinite() decides what a NaN gradient does
  uint64_t seed = 0;          // initial values and dropout masks
  // The weights to start from (a .keras model's), in variables() order; null: drawn from
  // the seed.
  std::shared_ptr<const std::vector<Tensor>> initial_weights;
  // The batch each replica's activations are sized for, checked with the weights against
  // the memory budget (--max_memory) before anything is allocated; 0 checks the weights.
  int64_t batch_size = 0;
  // Multiply the learning rate by num_replicas_in_sync (the linear scaling rule).
  bool scale_learning_rate = false;
  // One backend per local replica (a Backend serves one thread), called with the local
  // index 0..num_local_replicas()-1. Empty: the CPU backend.
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(int local_replica)> make_backend;
};

// Checks that `data` can feed `model` under `loss`, saying what would fix it: features per
// example, targets of the shape the loss wants, class ids inside the model's outputs (in
// file order, before any shuffle). `what` names the data ("data.train").
// Errors: INVALID_ARGUMENT.
absl::Status CheckDataFitsModel(const Dataset& data, const Model& model, const LossConfig& loss,
                                const std::string& what);

// Dropout masks must differ per step and replica and be reproducible from the seed.
uint64_t ReplicaDropoutSeed(uint64_t seed, int64_t step, int replica);

class ReplicatedModel {
 public:
  // `strategy` is not owned and must outlive the model.
  // Errors: INVALID_ARGUMENT a strategy whose replicas do not fit (fewer than 1, a local
  // range outside them); Model::FromKerasJson's and SetLoss's; Optimizer::Create's; the
  // backend factory's (INTERNAL when it returns null); RESOURCE_EXHAUSTED a model over the
  // memory budget, naming its largest layer.
  static absl::StatusOr<std::unique_ptr<ReplicatedModel>> Create(
      Strategy* strategy, const ReplicatedModelOptions& options);

  // Every variable, in Keras's order (what weights() and the gradients hold).
  const std::vector<VariableSpec>& variables() const { return models_[0]->variables(); }
  // Replica 0's model (its shapes, for checks).
  const Model& model() const { return *models_[0]; }
  const Optimizer& optimizer() const { return update_rules_->optimizer(); }
  const std::vector<Tensor>& weights() const { return weights_; }
  // The update count of the first variable (each step updates every variable).
  int64_t iterations() const { return states_.empty() ? 0 : states_[0]->iterations(); }

  // Forward and backward of replica `replica` (a global replica id this process runs) on
  // its slice, with the current weights: the gradient of the slice's mean loss goes to
  // gradients(replica). A slice of 0 rows gives zero gradients and an empty result.
  // Errors: INVALID_ARGUMENT a replica this process does not run; Model::TrainStep's.
  absl::StatusOr<StepResult> ComputeGradients(int replica, const Tensor& x, const Tensor& y,
                                              uint64_t dropout_seed);
  // Replica `replica`'s gradient buffer, in variables() order (a caller may change the
  // values, e.g. to clip them, before ApplyGradients). Must be a local replica.
  std::vector<Tensor>& gradients(int replica) { return grads_[replica]; }

  // One optimizer update from every replica's gradients: local replica i's slice had
  // slice_rows[i] of the global batch's global_rows (see the file comment). A gradient
  // holding a NaN or an infinity fails (naming the variable, the element and
  // global_step + 1) or, with nonfinite "skip", is dropped: returns false and changes
  // nothing. Multi-worker: a collective, every process calls it once per step.
  // Errors: INVALID_ARGUMENT as above, a slice_rows of the wrong length, gradients whose
  // shapes differ from the variables'; the strategy's (CrossWorkerSum's) errors.
  absl::StatusOr<bool> ApplyGradients(absl::Span<const int64_t> slice_rows, int64_t global_rows,
                                      int64_t global_step);

  // Continues from `state` (null: keep the fresh weights): values, optimizer slots and
  // iterations by variable name; `*epochs_done` and `*global_step` receive the state's.
  // Multi-worker: only the process that runs replica 0 reads `state` and sends it to the
  // others (a collective: every process calls it). Returns whether a state was restored.
  // Errors: INVALID_ARGUMENT a state that lacks a variable, has another shape, or a slot
  // the optimizer does not keep (named; nothing changes); FAILED_PRECONDITION
  // (multi-worker) the process with replica 0 could not apply its state; CrossWorkerSum's.
  absl::StatusOr<bool> Restore(const TrainingState* state, int* epochs_done,
                               int64_t* global_step);

  // The training state as a checkpoint keeps it (a copy).
  TrainingState State(int epochs_done, int64_t global_step) const;

  // Multi-worker strategies: the weights' fingerprints compared across workers (a
  // collective). One process: OK. Errors: Strategy::CheckInSync's.
  absl::Status CheckInSync();

  // The current weights on `data` at inference, in batches of `batch_size`, on a model of
  // its own (replica 0's backend), so the training models keep their buffers.
  // Errors: EvaluateOn's.
  absl::StatusOr<EvaluationResult> Evaluate(const Dataset& data, int64_t batch_size);

 private:
  ReplicatedModel(Strategy* strategy, NonFinitePolicy nonfinite)
      : strategy_(strategy), nonfinite_(nonfinite) {}
  bool multi_worker() const { return local_count_ != replicas_; }
  absl::Status BuildReplicaModels(const ReplicatedModelOptions& options);
  absl::Status BuildOptimizer(const ReplicatedModelOptions& options);

  Strategy* const strategy_;  // Not owned.
  const NonFinitePolicy nonfinite_;
  int replicas_ = 0;
  int local_begin_ = 0;
  int local_count_ = 0;
  std::vector<std::unique_ptr<Backend>> backends_;  // one per local replica
  std::vector<std::unique_ptr<Model>> models_;      // one per local replica
  std::unique_ptr<Model> eval_model_;
  std::unique_ptr<UpdateRules> update_rules_;
  std::vector<const Optimizer*> updates_;  // per variable, owned by update_rules_
  std::vector<Tensor> weights_;
  std::vector<std::unique_ptr<OptimizerState>> states_;  // one per variable
  // By global replica id (only the local ones are used).
  std::vector<std::vector<Tensor>> grads_;
  std::vector<std::vector<float>> reduced_;  // per variable
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_REPLICATED_MODEL_H_
