#include "distribute/replicated_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/finite.h"
#include "common/math/cpu_backend.h"
#include "common/model/model_memory.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Whether a step's gradients may be applied: OK(true) when all are finite, OK(false)
// when one is not and the job skips such steps, else INVALID_ARGUMENT naming the
// variable, the element and the (global) step. Every replica (and every worker, after
// the all-reduce) sees the same gradients, so all decide alike.
absl::StatusOr<bool> GradientsApplicable(const std::vector<absl::Span<const float>>& gradients,
                                         const std::vector<VariableSpec>& specs,
                                         NonFinitePolicy policy, int64_t global_step) {
  for (size_t v = 0; v < gradients.size(); ++v) {
    absl::Status finite =
        CheckFinite(gradients[v], absl::StrCat("the gradient for \"", specs[v].name, "\""));
    if (finite.ok()) continue;
    if (policy == NONFINITE_SKIP) return false;
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", global_step + 1, ": ", finite.message(),
        " (a learning rate too high? \"nonfinite\": \"skip\" in the job drops such steps)"));
  }
  return true;
}

// Copies `state` into `weights` and `states` (model order, `specs`), after checking all of
// it fits, so a state that does not fit changes nothing.
absl::Status ApplyState(const TrainingState& state, const std::vector<VariableSpec>& specs,
                        std::vector<Tensor>* weights,
                        std::vector<std::unique_ptr<OptimizerState>>* states) {
  const std::string source = "the restored state";
  PS_ASSIGN_OR_RETURN(std::vector<VariableSnapshot> ordered,
                      VariablesForModel(state, specs, source));
  for (size_t i = 0; i < specs.size(); ++i) {
    for (const NamedTensor& slot : ordered[i].slots) {
      if ((*states)[i]->slot(slot.name) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, " does not fit the model: ", specs[i].name, " has optimizer slot \"",
            slot.name, "\", which this job's optimizer does not keep (another optimizer?)"));
      }
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    VariableSnapshot& v = ordered[i];
    (*weights)[i] = std::move(v.value);
    (*states)[i]->set_iterations(v.iterations);
    for (const NamedTensor& slot : v.slots) {
      std::vector<float>* target = (*states)[i]->slot(slot.name);
      target->assign(slot.tensor.values().begin(), slot.tensor.values().end());
    }
  }
  return absl::OkStatus();
}

// The state a checkpoint keeps, copied out of the training loop's.
TrainingState CurrentState(int epochs_done, int64_t global_step,
                           const std::vector<VariableSpec>& specs,
                           const std::vector<Tensor>& weights,
                           const std::vector<std::unique_ptr<OptimizerState>>& states) {
  TrainingState state;
  state.epochs_done = epochs_done;
  state.global_step = global_step;
  for (size_t i = 0; i < specs.size(); ++i) {
    VariableSnapshot v;
    v.name = specs[i].name;
    v.value = weights[i];
    v.iterations = states[i]->iterations();
    // Every step updates every variable: its version is its update count.
    v.version = v.iterations;
    for (const auto& [name, values] : states[i]->slots()) {
      v.slots.push_back({name, Tensor(weights[i].shape(), *values)});
    }
    state.variables.push_back(std::move(v));
  }
  return state;
}

// A non-negative int64 as four 16-bit pieces: each is exact in a float, and a sum with
// zeros (a broadcast through CrossWorkerSum) leaves it unchanged.
void AppendInt(int64_t value, std::vector<float>* out) {
  for (int k = 0; k < 4; ++k) {
    out->push_back(static_cast<float>((static_cast<uint64_t>(value) >> (16 * k)) & 0xffff));
  }
}

int64_t ReadInt(const float* pieces) {
  uint64_t value = 0;
  for (int k = 0; k < 4; ++k) value |= static_cast<uint64_t>(pieces[k]) << (16 * k);
  return static_cast<int64_t>(value);
}

// Multi-worker restore: the process with replica 0 applies its state (if any) and sends
// everything to the others as a sum in which every other process contributes zeros,
// so all start from bit-identical weights and optimizer state. Two collectives (a header,
// then the tensors) when restoring, one otherwise. Returns whether a state was restored.
absl::StatusOr<bool> BroadcastRestore(Strategy* strategy, const TrainingState* restore,
                                      const std::vector<VariableSpec>& specs,
                                      std::vector<Tensor>* weights,
                                      std::vector<std::unique_ptr<OptimizerState>>* states,
                                      int* epochs_done, int64_t* global_step) {
  const bool sender = strategy->first_local_replica() == 0;
  enum Kind { kFresh = 0, kRestore = 1, kFailed = 2 };
  Kind kind = kFresh;
  absl::Status applied;
  if (sender && restore != nullptr) {
    applied = ApplyState(*restore, specs, weights, states);
    kind = applied.ok() ? kRestore : kFailed;
  }
  // Header: kind, epochs done, global step, each variable's iterations.
  std::vector<float> header = {sender ? static_cast<float>(kind) : 0.0f};
  const bool sends = sender && kind == kRestore;
  AppendInt(sends ? restore->epochs_done : 0, &header);
  AppendInt(sends ? restore->global_step : 0, &header);
  for (const auto& state : *states) AppendInt(sends ? state->iterations() : 0, &header);
  PS_RETURN_IF_ERROR(strategy->CrossWorkerSum({absl::MakeSpan(header)}));
  if (!applied.ok()) return applied;
  if (header[0] == kFailed) {
    return absl::FailedPreconditionError(
        "the worker with replica 0 could not restore its checkpoint (its log says why)");
  }
  if (header[0] != kRestore) return false;
  std::vector<absl::Span<float>> spans;
  for (size_t i = 0; i < weights->size(); ++i) {
    spans.push_back((*weights)[i].values());
    for (const auto& [name, values] : (*states)[i]->slots()) spans.push_back(absl::MakeSpan(*values));
  }
  if (!sender) {
    for (absl::Span<float> span : spans) std::fill(span.begin(), span.end(), 0.0f);
  }
  PS_RETURN_IF_ERROR(strategy->CrossWorkerSum(spans));
  *epochs_done = static_cast<int>(ReadInt(&header[1]));
  *global_step = ReadInt(&header[5]);
  for (size_t i = 0; i < states->size(); ++i) {
    (*states)[i]->set_iterations(ReadInt(&header[9 + 4 * i]));
  }
  return true;
}

}  // namespace

absl::Status CheckDataFitsModel(const Dataset& d, const Model& model, const LossConfig& loss_config,
                                const std::string& what) {
  if (d.num_examples() == 0) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (d.num_features() != model.input_size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", d.num_features(),
                                                   " features per example but the model takes ",
                                                   model.input_size()));
  }
  const bool sparse_loss =
      loss_config.kind == LossConfig::Kind::kSparseCategoricalCrossentropy;
  const std::string loss = LossName(loss_config.kind);
  if (sparse_loss && !d.sparse_labels() && d.label_width() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has [N,", d.label_width(), "] targets but ", loss,
        " wants class ids; use categorical_crossentropy for one-hot targets"));
  }
  // Now, in file order, rather than at the batch that holds it, in shuffled order.
  if (sparse_loss && d.sparse_labels() && model.output_size() > 1) {
    if (absl::Status ids = d.CheckClassIds(model.output_size()); !ids.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", ids.message()));
    }
  }
  if (!sparse_loss && model.output_size() > 1 && d.label_width() != model.output_size()) {
    if (d.sparse_labels()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has class-id labels but ", loss, " with ", model.output_size(),
          " outputs wants [N,", model.output_size(),
          "] targets; add \"one_hot_labels\": true at the top level of the job spec"));
    }
    return absl::InvalidArgumentError(absl::StrCat(what, " has [N,", d.label_width(),
                                                   "] targets but the model has ",
                                                   model.output_size(), " outputs"));
  }
  return absl::OkStatus();
}

uint64_t ReplicaDropoutSeed(uint64_t seed, int64_t step, int replica) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(step) * 0xD1B54A32D192ED03ULL +
               static_cast<uint64_t>(replica) * 0x8CB92BA72F3D8DD7ULL + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

absl::StatusOr<std::unique_ptr<ReplicatedModel>> ReplicatedModel::Create(
    Strategy* strategy, const ReplicatedModelOptions& options) {
  if (strategy == nullptr) return absl::InvalidArgumentError("no strategy");
  std::unique_ptr<ReplicatedModel> model(
      new ReplicatedModel(strategy, options.optimizer.nonfinite()));
  model->replicas_ = strategy->num_replicas_in_sync();
  if (model->replicas_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat("strategy ", strategy->name(), " has ",
                                                   model->replicas_, " replicas"));
  }
  model->local_begin_ = strategy->first_local_replica();
  model->local_count_ = strategy->num_local_replicas();
  if (model->local_count_ < 1 || model->local_begin_ < 0 ||
      model->local_begin_ + model->local_count_ > model->replicas_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ", strategy->name(), " runs replicas [", model->local_begin_, ", ",
        model->local_begin_ + model->local_count_, ") of ", model->replicas_));
  }
  PS_RETURN_IF_ERROR(model->BuildReplicaModels(options));
  PS_RETURN_IF_ERROR(model->BuildOptimizer(options));
  return model;
}

// One backend and model per local replica (neither may be shared between threads), and
// one model for evaluation, on replica 0's backend (used only between steps) so its
// batch sizes do not make the training models reallocate their buffers.
absl::Status ReplicatedModel::BuildReplicaModels(const ReplicatedModelOptions& options) {
  for (int r = 0; r < local_count_; ++r) {
    std::unique_ptr<Backend> backend;
    if (options.make_backend) {
      PS_ASSIGN_OR_RETURN(backend, options.make_backend(r));
      if (backend == nullptr) return absl::InternalError("backend factory returned null");
    } else {
      backend = CreateCpuBackend();
    }
    PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                        Model::FromKerasJson(options.keras_model, backend.get()));
    PS_RETURN_IF_ERROR(model->SetLoss(options.loss));
    backends_.push_back(std::move(backend));
    models_.push_back(std::move(model));
  }
  PS_ASSIGN_OR_RETURN(eval_model_, Model::FromKerasJson(options.keras_model, backends_[0].get()));
  return eval_model_->SetLoss(options.loss);
}

// The optimizer (its learning rate scaled by the replicas when asked) for trainable
// variables and a moving average for the others (BatchNormalization's statistics, as on
// the ps: the "gradient" of one is the replicas' batch statistics, weighted by their
// slices like the gradients), fresh weights from the seed, an optimizer state per
// variable, and the per-step buffers.
absl::Status ReplicatedModel::BuildOptimizer(const ReplicatedModelOptions& options) {
  OptimizerConfig config = options.optimizer;
  if (options.scale_learning_rate && replicas_ > 1) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> resolved, Optimizer::Create(config));
    config = resolved->config();
    config.set_learning_rate(config.learning_rate() * static_cast<float>(replicas_));
  }
  AddMovingAverageRules(variables(), &config);
  PS_ASSIGN_OR_RETURN(update_rules_, UpdateRules::Create(config));
  // Before anything is allocated: the weights, each local replica's gradients, the
  // reduced sum, the optimizer's slots and every replica's activations.
  ModelMemoryUse use;
  const int64_t slots =
      static_cast<int64_t>(update_rules_->optimizer().NewState(1)->slots().size());
  use.copies_per_variable = 1 + local_count_ + (replicas_ > 1 ? 1 : 0) + slots;
  use.copies_are =
      absl::StrCat("values, gradients and ", slots, " optimizer slot", slots == 1 ? "" : "s");
  use.batch = options.batch_size;
  PS_RETURN_IF_ERROR(CheckModelMemory(*models_[0], use, "this process"));
  if (options.initial_weights != nullptr) {
    const std::vector<VariableSpec>& variables = models_[0]->variables();
    const std::vector<Tensor>& initial = *options.initial_weights;
    for (size_t i = 0; i < std::max(variables.size(), initial.size()); ++i) {
      if (i >= variables.size() || i >= initial.size() || initial[i].shape() != variables[i].shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the initial weights do not fit the model at variable ", i, " (",
            initial.size(), " weights for ", variables.size(), " variables)"));
      }
    }
    weights_ = initial;
  } else {
    weights_ = models_[0]->InitialValues(options.seed);
  }
  for (size_t v = 0; v < weights_.size(); ++v) {
    updates_.push_back(&update_rules_->For(variables()[v].name));
    states_.push_back(updates_.back()->NewState(weights_[v].num_elements()));
  }
  grads_.resize(replicas_);
  reduced_.resize(weights_.size());
  return absl::OkStatus();
}

absl::StatusOr<StepResult> ReplicatedModel::ComputeGradients(int replica, const Tensor& x,
                                                             const Tensor& y,
                                                             uint64_t dropout_seed) {
  if (replica < local_begin_ || replica >= local_begin_ + local_count_) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", replica, " does not run here (",
                                                   "this process runs [", local_begin_, ", ",
                                                   local_begin_ + local_count_, "))"));
  }
  std::vector<Tensor>& grads = grads_[replica];
  if (!x.shape().empty() && x.shape()[0] == 0) {  // a short last batch left this replica none
    grads.resize(weights_.size());
    for (size_t v = 0; v < weights_.size(); ++v) grads[v] = Tensor(weights_[v].shape());
    return StepResult();
  }
  return models_[replica - local_begin_]->TrainStep(weights_, x, y, dropout_seed, &grads);
}

absl::StatusOr<bool> ReplicatedModel::ApplyGradients(absl::Span<const int64_t> slice_rows,
                                                     int64_t global_rows, int64_t global_step) {
  const size_t num_vars = weights_.size();
  if (static_cast<int>(slice_rows.size()) != local_count_) {
    return absl::InvalidArgumentError(absl::StrCat("ApplyGradients got ", slice_rows.size(),
                                                   " slices for ", local_count_,
                                                   " local replicas"));
  }
  for (int r = local_begin_; r < local_begin_ + local_count_; ++r) {
    if (grads_[r].size() != num_vars) {
      return absl::InvalidArgumentError(absl::StrCat("replica ", r, " has ", grads_[r].size(),
                                                     " gradients for ", num_vars, " variables"));
    }
    for (size_t v = 0; v < num_vars; ++v) {
      if (grads_[r][v].shape() != weights_[v].shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replica ", r, ": the gradient for \"", variables()[v].name, "\" is ",
            grads_[r][v].ShapeString(), ", the variable ", weights_[v].ShapeString()));
      }
    }
  }
  if (replicas_ == 1) {
    std::vector<absl::Span<const float>> spans;
    for (size_t v = 0; v < num_vars; ++v) spans.push_back(grads_[0][v].values());
    PS_ASSIGN_OR_RETURN(const bool apply,
                        GradientsApplicable(spans, variables(), nonfinite_, global_step));
    for (size_t v = 0; v < num_vars && apply; ++v) {
      updates_[v]->Apply(grads_[0][v].values(), weights_[v].values(), states_[v].get());
    }
    return apply;
  }
  const float rows = static_cast<float>(std::max<int64_t>(global_rows, 1));
  for (int r = local_begin_; r < local_begin_ + local_count_; ++r) {
    const float share = static_cast<float>(slice_rows[r - local_begin_]) / rows;
    for (size_t v = 0; v < num_vars; ++v) {
      for (float& g : grads_[r][v].values()) g *= share;
    }
  }
  for (size_t v = 0; v < num_vars; ++v) {
    std::vector<absl::Span<const float>> per_replica;
    for (int r = local_begin_; r < local_begin_ + local_count_; ++r) {
      per_replica.push_back(grads_[r][v].values());
    }
    PS_ASSIGN_OR_RETURN(reduced_[v], strategy_->Reduce(ReduceOp::kSum, per_replica));
  }
  if (multi_worker()) {
    // One call for all variables, so the all-reduce can fuse them into buckets.
    std::vector<absl::Span<float>> spans;
    for (std::vector<float>& g : reduced_) spans.push_back(absl::MakeSpan(g));
    PS_RETURN_IF_ERROR(strategy_->CrossWorkerSum(spans));
  }
  std::vector<absl::Span<const float>> spans(reduced_.begin(), reduced_.end());
  PS_ASSIGN_OR_RETURN(const bool apply,
                      GradientsApplicable(spans, variables(), nonfinite_, global_step));
  for (size_t v = 0; v < num_vars && apply; ++v) {
    updates_[v]->Apply(reduced_[v], weights_[v].values(), states_[v].get());
  }
  return apply;
}

absl::StatusOr<bool> ReplicatedModel::Restore(const TrainingState* state, int* epochs_done,
                                              int64_t* global_step) {
  if (multi_worker()) {
    return BroadcastRestore(strategy_, state, variables(), &weights_, &states_, epochs_done,
                            global_step);
  }
  if (state == nullptr) return false;
  PS_RETURN_IF_ERROR(ApplyState(*state, variables(), &weights_, &states_));
  *epochs_done = state->epochs_done;
  *global_step = state->global_step;
  return true;
}

TrainingState ReplicatedModel::State(int epochs_done, int64_t global_step) const {
  return CurrentState(epochs_done, global_step, variables(), weights_, states_);
}

absl::Status ReplicatedModel::CheckInSync() {
  if (!multi_worker()) return absl::OkStatus();
  std::vector<absl::Span<const float>> w;
  for (const Tensor& t : weights_) w.push_back(t.values());
  return strategy_->CheckInSync(w);
}

absl::StatusOr<EvaluationResult> ReplicatedModel::Evaluate(const Dataset& data,
                                                           int64_t batch_size) {
  return EvaluateOn(eval_model_.get(), weights_, data, batch_size);
}

}  // namespace pstrain
