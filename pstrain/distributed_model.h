#ifndef PSTRAIN_PSTRAIN_DISTRIBUTED_MODEL_H_
#define PSTRAIN_PSTRAIN_DISTRIBUTED_MODEL_H_

// A model built in a strategy's scope (TensorFlow: `with strategy.scope(): model = ...;
// optimizer = ...`): its variables live where the strategy keeps them, and its optimizer
// runs where the strategy applies updates. Made by Strategy::CreateModel.
//
//   strategy          variables                          ApplyGradients
//   default           one copy in this process           updates it
//   mirrored          one copy shared by the replicas    every replica's gradients are
//                                                        summed (weighted by their share
//                                                        of the global batch), then one
//                                                        update, when Run() ends
//   multi_worker_     one copy per worker process,       the same, summed across the
//   mirrored          kept identical                     workers by an all-reduce
//   parameter_server  sharded over the ps tasks          pushes the gradients to the ps,
//                                                        whose optimizer applies them, and
//                                                        pulls the new values back

#include <cstdint>
#include <string>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/model/job_spec.h"
#include "common/model/loss.h"
#include "common/model/model.h"
#include "common/sharding/placement_policy.h"
#include "common/tensor.h"
#include "common/training/evaluator.h"
#include "common/training/training_state.h"
#include "nlohmann/json.hpp"
#include "proto/ps.pb.h"
#include "pstrain/replica.h"

namespace pstrain::distribute {

// What Keras's model.to_json() and model.compile(...) say, and the seed.
struct ModelOptions {
  nlohmann::json keras_model;  // a Sequential model's to_json() (Keras 2 or 3)
  LossConfig loss;
  OptimizerConfig optimizer;
  uint64_t seed = 0;  // initial values and dropout masks
  // The weights to start from (a .keras model's, JobSpec::initial_weights), in the model's
  // variables() order; null: drawn from the seed.
  std::shared_ptr<const std::vector<Tensor>> initial_weights;
  // Multiply the learning rate by num_replicas_in_sync (synchronous strategies).
  bool scale_learning_rate = false;
  // Synchronous strategies: the batch each replica's activations are sized for, checked
  // with the weights against the memory budget (--max_memory) before anything is
  // allocated (Fit passes fit.batch_size); 0 checks the weights only.
  int64_t batch_size = 0;
  // parameter_server: how the variables are split and spread over the ps tasks.
  PlacementPolicy placement;
  // The job spec these came from (FromJobSpec), which checkpoints record whole (its data
  // too, so tools/evaluate finds it); null: they record the model, compile settings and
  // seed above.
  std::shared_ptr<const JobSpec> job;

  // The model, compile settings, seed, "scale_learning_rate" and "placement" of a job
  // spec (common/model/job_spec.h).
  static ModelOptions FromJobSpec(const JobSpec& job);
};

// One replica's gradients, as tf.GradientTape.gradient gives them, with what the step
// measured on its slice.
struct Gradients {
  // The gradient of the slice's mean loss for every variable, in variables() order
  // (non-trainable ones carry their observations, see common/model/variable_spec.h). A
  // step function may change the values (clip them, say) before ApplyGradients.
  // parameter_server, a model whose first layer is an Embedding: the worker moves its
  // table by rows (ps_server/client/sparse_embedding.h), and values[0] is the gradient of
  // the rows of the slice's distinct ids, ascending, then rows of zeros (TensorFlow hands
  // an embedding's gradient over as IndexedSlices for the same reason); ApplyGradients
  // pushes those rows. A norm or a clip of every value is unchanged by this.
  std::vector<Tensor> values;
  StepResult metrics;  // the slice's loss sum, correct predictions and samples
  int replica = 0;     // replica_id_in_sync_group that computed them
  int64_t rows = 0;    // rows of the slice
  int64_t global_batch_size = 0;
};

class DistributedModel {
 public:
  virtual ~DistributedModel() = default;

  // Every variable, in Keras's order ("dense/kernel", "dense/bias", ...).
  virtual const std::vector<VariableSpec>& variables() const = 0;

  // Forward and backward pass of replica ctx on its slice, with the variables' current
  // values (on a parameter_server worker: as last pulled, pulling first if nothing was).
  // Call inside Strategy::Run. Errors: INVALID_ARGUMENT a slice that does not fit the
  // model (shapes named) or a replica this process does not run; FAILED_PRECONDITION on
  // the parameter_server chief (steps run on the workers: ClusterCoordinator::Schedule);
  // a ps that cannot be reached (named).
  virtual absl::StatusOr<Gradients> ComputeGradients(const ReplicaContext& ctx,
                                                     const ReplicaBatch& batch) = 0;

  // optimizer.apply_gradients (see the table above). Synchronous strategies take the
  // update when Run() ends, once every replica of the step has handed in its gradients
  // (a replica that computed but did not apply fails the step); parameter_server
  // applies on the ps at once. Call inside Strategy::Run, with ctx's own gradients.
  // Errors: INVALID_ARGUMENT gradients of another replica or of other shapes; what
  // ComputeGradients returns; at the end of Run: a gradient holding a NaN or an infinity
  // (named) unless the optimizer's nonfinite policy skips such steps.
  virtual absl::Status ApplyGradients(const ReplicaContext& ctx, Gradients gradients) = 0;

  // model.get_weights(): every variable's current value, in variables() order (under
  // parameter_server pulled from the ps tasks, an Embedding table too). Errors: a ps that
  // cannot be reached.
  virtual absl::StatusOr<std::vector<Tensor>> GetWeights() = 0;

  // model.evaluate(data, batch_size): the current values at inference (dropout off), in
  // batches of `batch_size` rows taken in order. The parameter_server chief pulls the
  // dense variables and of an Embedding table only each batch's rows, never the table
  // (ps_server/client/sharded_evaluator.h); the figures are those of the whole weights.
  // Errors: INVALID_ARGUMENT data that does not fit the model; GetWeights'.
  virtual absl::StatusOr<EvaluationResult> Evaluate(const Dataset& data, int64_t batch_size) = 0;

  // OK when `data` can feed this model under its loss; else INVALID_ARGUMENT saying what
  // would fix it, starting with `what` ("data.train").
  virtual absl::Status CheckData(const Dataset& data, const std::string& what) const = 0;

  // What Keras's fit needs beyond a custom loop's step (pstrain/fit.h; the synchronous
  // strategies implement them, parameter_server answers as noted: its chief's loop
  // checkpoints with Strategy::Save/Restore).

  // Multi-worker: compares a fingerprint of the weights across the workers (a collective:
  // every worker calls it at the same point). OK in one process and under
  // parameter_server. Errors: FAILED_PRECONDITION the workers' weights differ; the
  // all-reduce's.
  virtual absl::Status CheckInSync() { return absl::OkStatus(); }

  // Continues from `state` (null: keeps the current values and returns false): values,
  // optimizer slots and update counts by variable name (a slot the state lacks keeps its
  // value); the steps from then on number from state->global_step (dropout masks follow
  // the step, so a continued job trains as one that never stopped). Multi-worker: only
  // the process that runs replica 0 reads `state` and sends it to the others; every
  // worker calls it (a collective). Returns whether a state was restored, with its
  // epochs_done and global_step in *progress_epochs and *progress_step.
  // Errors: INVALID_ARGUMENT a state that lacks a variable, has another shape, or a slot
  // the optimizer does not keep (named; nothing changes); FAILED_PRECONDITION
  // (multi-worker) the process with replica 0 could not apply its state; UNIMPLEMENTED
  // under parameter_server.
  virtual absl::StatusOr<bool> RestoreState(const TrainingState* state, int* progress_epochs,
                                            int64_t* progress_step);

  // The whole training state as a checkpoint keeps it (common/training/training_state.h),
  // recorded with `epochs_done` and `global_step`. Errors: UNIMPLEMENTED under
  // parameter_server.
  virtual absl::StatusOr<TrainingState> GetState(int epochs_done, int64_t global_step) const;

  // Updates dropped because a gradient held a NaN or an infinity (the optimizer's
  // "nonfinite": "skip"), since the model was made. 0 under parameter_server (the ps
  // counts them: psctl status).
  virtual int64_t skipped_updates() const { return 0; }
};

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_DISTRIBUTED_MODEL_H_
