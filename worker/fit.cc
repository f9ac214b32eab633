#include "worker/fit.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data/batcher.h"
#include "common/data/data_spec.h"
#include "common/finite.h"
#include "common/math/cpu_backend.h"
#include "common/model/model.h"
#include "common/model/optimizer.h"
#include "common/status_macros.h"
#include "common/training/evaluator.h"

namespace pstrain {
namespace {

absl::StatusOr<std::shared_ptr<const Dataset>> LoadOne(const nlohmann::json& source,
                                                       const std::string& base_dir,
                                                       const std::string& what, bool one_hot) {
  PS_ASSIGN_OR_RETURN(Dataset loaded, LoadJobDataset(source, base_dir, what, one_hot));
  return std::make_shared<const Dataset>(std::move(loaded));
}

// Checks that `d` can feed `model` under its loss, saying what would fix it.
absl::Status CheckData(const Dataset& d, const Model& model, const JobSpec& job,
                       const std::string& what) {
  if (d.num_examples() == 0) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (d.num_features() != model.input_size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", d.num_features(),
                                                   " features per example but the model takes ",
                                                   model.input_size()));
  }
  const bool sparse_loss =
      job.loss.kind == LossConfig::Kind::kSparseCategoricalCrossentropy;
  const std::string loss = LossName(job.loss.kind);
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

// Rows [start, start + count) of a row-major tensor whose first dimension is the batch.
Tensor Rows(const Tensor& t, int64_t start, int64_t count) {
  std::vector<int64_t> shape = t.shape();
  const int64_t width = shape[0] == 0 ? 0 : t.num_elements() / shape[0];
  shape[0] = count;
  Tensor out(std::move(shape));
  std::memcpy(out.data(), t.data() + start * width, sizeof(float) * count * width);
  return out;
}

// Dropout masks must differ per step and replica and be reproducible from the job seed.
uint64_t StepSeed(uint64_t seed, int64_t step, int replica) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(step) * 0xD1B54A32D192ED03ULL +
               static_cast<uint64_t>(replica) * 0x8CB92BA72F3D8DD7ULL + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
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

absl::StatusOr<FitData> LoadFitData(const JobSpec& job, const std::string& base_dir) {
  const bool one_hot = job.one_hot_labels;
  if (!job.data.is_object() || !job.data.contains("train")) {
    return absl::InvalidArgumentError("job spec: data.train is missing");
  }
  FitData data;
  PS_ASSIGN_OR_RETURN(data.train, LoadOne(job.data["train"], base_dir, "data.train", one_hot));
  if (job.data.contains("validation") && !job.data["validation"].is_null()) {
    PS_ASSIGN_OR_RETURN(data.validation, LoadOne(job.data["validation"], base_dir,
                                                 "data.validation", one_hot));
  }
  return data;
}

namespace {

// One call of Fit: its named steps and the state they share. Replicas
// [local_begin_, local_begin_ + local_count_) run here; a multi-worker strategy runs the
// rest in other processes and sums them in with CrossWorkerSum.
class FitRun {
 public:
  FitRun(const JobSpec& job, const FitData& data, Strategy* strategy, const FitOptions& options)
      : job_(job), data_(data), strategy_(strategy), options_(options) {}

  absl::StatusOr<FitResult> Run() {
    PS_RETURN_IF_ERROR(CheckArguments());
    PS_RETURN_IF_ERROR(BuildReplicaModels());
    PS_RETURN_IF_ERROR(BuildOptimizer());
    PS_RETURN_IF_ERROR(RestoreState());
    // Before the first step: every worker starts from the same weights (and this first
    // collective is where the workers meet).
    PS_RETURN_IF_ERROR(CheckInSync());
    for (int epoch = first_epoch_; epoch < epochs_; ++epoch) {
      const absl::Time start = absl::Now();
      PS_ASSIGN_OR_RETURN(EpochSummary summary, TrainEpoch(epoch, start));
      PS_RETURN_IF_ERROR(Validate(&summary));
      summary.elapsed = absl::Now() - start;
      result_.history.push_back(summary);
      const bool go_on = !options_.on_epoch || options_.on_epoch(summary);
      // After the epoch line, as the chief does; an epoch that stops training is kept too.
      if (options_.on_checkpoint) {
        PS_RETURN_IF_ERROR(options_.on_checkpoint(
            CurrentState(epoch + 1, result_.steps, specs(), result_.weights, states_)));
      }
      if (!go_on) break;
    }
    return std::move(result_);
  }

 private:
  bool multi_worker() const { return local_count_ != replicas_; }
  const std::vector<VariableSpec>& specs() const { return models_[0]->variables(); }

  // The strategy's replicas, the epochs and the data, before anything is built.
  absl::Status CheckArguments() {
    if (strategy_ == nullptr) return absl::InvalidArgumentError("Fit: no strategy");
    replicas_ = strategy_->num_replicas_in_sync();
    if (replicas_ < 1) {
      return absl::InvalidArgumentError(absl::StrCat("strategy ", strategy_->name(), " has ",
                                                     replicas_, " replicas"));
    }
    local_begin_ = strategy_->first_local_replica();
    local_count_ = strategy_->num_local_replicas();
    if (local_count_ < 1 || local_begin_ < 0 || local_begin_ + local_count_ > replicas_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy ", strategy_->name(), " runs replicas [", local_begin_, ", ",
          local_begin_ + local_count_, ") of ", replicas_));
    }
    epochs_ = options_.epochs > 0 ? options_.epochs : job_.epochs;
    if (epochs_ < 1) return absl::InvalidArgumentError(absl::StrCat("epochs ", epochs_, " < 1"));
    if (data_.train == nullptr) return absl::InvalidArgumentError("Fit: no training data");
    return absl::OkStatus();
  }

  // One backend and model per local replica (neither may be shared between threads), and
  // one model for evaluation, on replica 0's backend (used only between epochs) so its
  // batch sizes do not make the training models reallocate their buffers. Then checks
  // that the data fits the model.
  absl::Status BuildReplicaModels() {
    for (int r = 0; r < local_count_; ++r) {
      std::unique_ptr<Backend> backend;
      if (options_.make_backend) {
        PS_ASSIGN_OR_RETURN(backend, options_.make_backend(r));
        if (backend == nullptr) return absl::InternalError("backend factory returned null");
      } else {
        backend = CreateCpuBackend();
      }
      PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                          Model::FromKerasJson(job_.model, backend.get()));
      PS_RETURN_IF_ERROR(model->SetLoss(job_.loss));
      backends_.push_back(std::move(backend));
      models_.push_back(std::move(model));
    }
    PS_ASSIGN_OR_RETURN(eval_model_, Model::FromKerasJson(job_.model, backends_[0].get()));
    PS_RETURN_IF_ERROR(eval_model_->SetLoss(job_.loss));
    PS_RETURN_IF_ERROR(CheckData(*data_.train, *models_[0], job_, "data.train"));
    if (data_.validation != nullptr) {
      PS_RETURN_IF_ERROR(CheckData(*data_.validation, *models_[0], job_, "data.validation"));
    }
    return absl::OkStatus();
  }

  // The job's optimizer (its learning rate scaled by the replicas when the job says so),
  // fresh weights from the job's seed, an optimizer state per variable, and the per-step
  // buffers.
  absl::Status BuildOptimizer() {
    PS_ASSIGN_OR_RETURN(optimizer_, Optimizer::Create(job_.optimizer));
    if (job_.scale_learning_rate && replicas_ > 1) {
      OptimizerConfig scaled = optimizer_->config();
      scaled.set_learning_rate(scaled.learning_rate() * static_cast<float>(replicas_));
      PS_ASSIGN_OR_RETURN(optimizer_, Optimizer::Create(scaled));
    }
    result_.weights = models_[0]->InitialValues(job_.seed);
    for (const Tensor& w : result_.weights) states_.push_back(optimizer_->NewState(w.num_elements()));
    grads_.resize(replicas_);
    step_results_.resize(replicas_);
    slice_x_.resize(replicas_);
    slice_y_.resize(replicas_);
    slice_rows_.resize(replicas_);
    reduced_.resize(result_.weights.size());
    return absl::OkStatus();
  }

  // A restored state replaces the fresh weights and optimizer state; training continues
  // with the epoch after the last one it finished.
  absl::Status RestoreState() {
    bool restored = false;
    if (multi_worker()) {
      PS_ASSIGN_OR_RETURN(restored,
                          BroadcastRestore(strategy_, options_.restore, specs(), &result_.weights,
                                           &states_, &first_epoch_, &result_.steps));
    } else if (options_.restore != nullptr) {
      PS_RETURN_IF_ERROR(ApplyState(*options_.restore, specs(), &result_.weights, &states_));
      first_epoch_ = options_.restore->epochs_done;
      result_.steps = options_.restore->global_step;
      restored = true;
    }
    if (restored && options_.on_restored) options_.on_restored(first_epoch_, result_.steps);
    return absl::OkStatus();
  }

  // Epoch `epoch` (0-based): a Batcher over the training data, reshuffled with a seed of
  // (job seed, epoch), full passes or steps_per_epoch batches of a repeating stream; one
  // step per batch; the figures summed over every replica of every worker. `start` is
  // when the epoch began (progress reports count from it).
  absl::StatusOr<EpochSummary> TrainEpoch(int epoch, absl::Time start) {
    BatcherOptions bo;
    bo.batch_size = job_.batch_size;
    bo.shuffle_buffer = job_.shuffle ? data_.train->num_examples() : 0;
    // The same per-epoch seed as the ps-mode worker's shard 0 uses.
    bo.seed = job_.seed * 1000003 + static_cast<uint64_t>(epoch) * 8191;
    // With steps_per_epoch the data repeats, as Keras does with a repeated tf.data dataset.
    bo.epochs = job_.steps_per_epoch > 0 ? -1 : 1;
    bo.prefetch = options_.prefetch;
    PS_ASSIGN_OR_RETURN(std::unique_ptr<Batcher> batcher, Batcher::Create(data_.train, bo));
    const int64_t steps =
        job_.steps_per_epoch > 0 ? job_.steps_per_epoch : batcher->batches_per_epoch();
    StepResult totals;
    int64_t steps_taken = 0;
    for (int64_t step = 0; step < steps; ++step) {
      const StepResult before = totals;
      absl::StatusOr<Batch> batch = batcher->Next();
      if (absl::IsOutOfRange(batch.status())) break;
      if (!batch.ok()) return batch.status();
      PS_RETURN_IF_ERROR(TrainStep(*batch, &totals));
      ++steps_taken;
      if (options_.sync_check_every > 0 && result_.steps % options_.sync_check_every == 0) {
        PS_RETURN_IF_ERROR(CheckInSync());
      }
      if (options_.on_batch) ReportProgress(epoch, step, steps, before, totals, start);
    }
    if (multi_worker()) {
      PS_RETURN_IF_ERROR(SumAcrossWorkers(&totals));
      PS_RETURN_IF_ERROR(CheckInSync());
    }
    EpochSummary summary;
    summary.epoch = epoch + 1;
    summary.epochs = epochs_;
    summary.samples = totals.samples;
    summary.steps = steps_taken;
    const double s = static_cast<double>(std::max<int64_t>(totals.samples, 1));
    summary.loss = totals.loss_sum / s;
    summary.accuracy = static_cast<double>(totals.correct) / s;
    return summary;
  }

  // One optimizer step on the global batch `batch`: each local replica trains on its
  // slice, the gradients are reduced (and summed across workers) and applied; the local
  // replicas' figures are added to `totals`.
  absl::Status TrainStep(const Batch& batch, StepResult* totals) {
    const int64_t rows = batch.x.shape()[0];
    SliceBatch(batch);
    PS_RETURN_IF_ERROR(RunReplicas(batch, result_.steps));
    for (int r = local_begin_; r < local_begin_ + local_count_; ++r) {
      totals->loss_sum += step_results_[r].loss_sum;
      totals->correct += step_results_[r].correct;
      totals->samples += step_results_[r].samples;
    }
    PS_RETURN_IF_ERROR(ApplyGradients(rows));
    ++result_.steps;
    return absl::OkStatus();
  }

  // The global batch split evenly across the replicas, each local replica's rows copied
  // out (one replica trains on the batch itself).
  void SliceBatch(const Batch& batch) {
    const int64_t rows = batch.x.shape()[0];
    if (replicas_ == 1) {
      slice_rows_[0] = rows;
      return;
    }
    for (int r = local_begin_; r < local_begin_ + local_count_; ++r) {
      const int64_t begin = rows * r / replicas_;
      const int64_t end = rows * (r + 1) / replicas_;
      slice_rows_[r] = end - begin;
      slice_x_[r] = Rows(batch.x, begin, end - begin);
      slice_y_[r] = Rows(batch.y, begin, end - begin);
    }
  }

  // Every local replica's TrainStep on its slice (Strategy::Run), into grads_[r] and
  // step_results_[r].
  absl::Status RunReplicas(const Batch& batch, int64_t global_step) {
    const size_t num_vars = result_.weights.size();
    return strategy_->Run([&](int r) -> absl::Status {
      if (r < local_begin_ || r >= local_begin_ + local_count_) {
        return absl::InternalError(absl::StrCat("strategy ran replica ", r));
      }
      if (slice_rows_[r] == 0) {  // a short last batch leaves a replica nothing to do
        grads_[r].resize(num_vars);
        for (size_t v = 0; v < num_vars; ++v) grads_[r][v] = Tensor(result_.weights[v].shape());
        step_results_[r] = StepResult();
        return absl::OkStatus();
      }
      const Tensor& x = replicas_ > 1 ? slice_x_[r] : batch.x;
      const Tensor& y = replicas_ > 1 ? slice_y_[r] : batch.y;
      PS_ASSIGN_OR_RETURN(step_results_[r],
                          models_[r - local_begin_]->TrainStep(result_.weights, x, y,
                                                               StepSeed(job_.seed, global_step, r),
                                                               &grads_[r]));
      return absl::OkStatus();
    });
  }

  // One Optimizer::Apply per variable with the gradient of the global batch's mean loss
  // (`rows` rows). With one replica its gradient is that already; otherwise each replica's
  // gradient (of its slice's mean loss) is weighted by its slice's share, the local ones
  // summed with Strategy::Reduce and, multi-worker, every worker's with one CrossWorkerSum.
  // A gradient holding a NaN or an infinity fails the step, or skips it (nothing applied)
  // under "nonfinite": "skip".
  absl::Status ApplyGradients(int64_t rows) {
    const size_t num_vars = result_.weights.size();
    const NonFinitePolicy policy = job_.optimizer.nonfinite();
    if (replicas_ == 1) {
      std::vector<absl::Span<const float>> spans;
      for (size_t v = 0; v < num_vars; ++v) spans.push_back(grads_[0][v].values());
      PS_ASSIGN_OR_RETURN(const bool apply,
                          GradientsApplicable(spans, specs(), policy, result_.steps));
      if (!apply) ++result_.nonfinite_skipped;
      for (size_t v = 0; v < num_vars && apply; ++v) {
        optimizer_->Apply(grads_[0][v].values(), result_.weights[v].values(), states_[v].get());
      }
      return absl::OkStatus();
    }
    for (int r = local_begin_; r < local_begin_ + local_count_; ++r) {
      const float share = static_cast<float>(slice_rows_[r]) / static_cast<float>(rows);
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
                        GradientsApplicable(spans, specs(), policy, result_.steps));
    if (!apply) ++result_.nonfinite_skipped;
    for (size_t v = 0; v < num_vars && apply; ++v) {
      optimizer_->Apply(reduced_[v], result_.weights[v].values(), states_[v].get());
    }
    return absl::OkStatus();
  }

  // The epoch's figures over every replica of every worker. Floats hold the counts exactly
  // (below 2^24 samples an epoch) and the loss sum to far better than the 4 digits printed.
  absl::Status SumAcrossWorkers(StepResult* totals) {
    std::vector<float> sums = {static_cast<float>(totals->loss_sum),
                               static_cast<float>(totals->correct),
                               static_cast<float>(totals->samples)};
    std::vector<absl::Span<float>> spans = {absl::MakeSpan(sums)};
    PS_RETURN_IF_ERROR(strategy_->CrossWorkerSum(spans));
    totals->loss_sum = sums[0];
    totals->correct = static_cast<int64_t>(sums[1]);
    totals->samples = static_cast<int64_t>(sums[2]);
    return absl::OkStatus();
  }

  // The validation data, if any, in batches of the job's batch size with dropout off.
  absl::Status Validate(EpochSummary* summary) {
    if (data_.validation == nullptr) return absl::OkStatus();
    PS_ASSIGN_OR_RETURN(EvaluationResult val, EvaluateOn(eval_model_.get(), result_.weights,
                                                         *data_.validation, job_.batch_size));
    summary->has_validation = true;
    summary->val_loss = val.loss;
    summary->val_accuracy = val.accuracy;
    return absl::OkStatus();
  }

  // Multi-worker strategies: the weights' fingerprints compared across workers.
  absl::Status CheckInSync() {
    if (!multi_worker()) return absl::OkStatus();
    std::vector<absl::Span<const float>> w;
    for (const Tensor& t : result_.weights) w.push_back(t.values());
    return strategy_->CheckInSync(w);
  }

  // The epoch's progress after step `step` (0-based) of `steps`: running means over
  // `totals`, and the step's own figures (`totals` less `before`).
  void ReportProgress(int epoch, int64_t step, int64_t steps, const StepResult& before,
                      const StepResult& totals, absl::Time start) {
    BatchProgress p;
    p.epoch = epoch + 1;
    p.epochs = epochs_;
    p.step = step + 1;
    p.steps = steps;
    const double s = static_cast<double>(std::max<int64_t>(totals.samples, 1));
    p.loss = totals.loss_sum / s;
    p.accuracy = static_cast<double>(totals.correct) / s;
    p.global_step = result_.steps;
    p.samples = totals.samples - before.samples;
    p.step_loss =
        (totals.loss_sum - before.loss_sum) / static_cast<double>(std::max<int64_t>(p.samples, 1));
    p.elapsed = absl::Now() - start;
    options_.on_batch(p);
  }

  const JobSpec& job_;
  const FitData& data_;
  Strategy* const strategy_;  // Not owned.
  const FitOptions& options_;
  int replicas_ = 0;
  int local_begin_ = 0;
  int local_count_ = 0;
  int epochs_ = 0;
  int first_epoch_ = 0;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<Model>> models_;  // one per local replica
  std::unique_ptr<Model> eval_model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::unique_ptr<OptimizerState>> states_;  // one per variable
  FitResult result_;
  // Per-step buffers, by global replica index (only the local ones are used).
  std::vector<std::vector<Tensor>> grads_;
  std::vector<StepResult> step_results_;
  std::vector<Tensor> slice_x_, slice_y_;
  std::vector<int64_t> slice_rows_;
  std::vector<std::vector<float>> reduced_;  // per variable
};

}  // namespace

absl::StatusOr<FitResult> Fit(const JobSpec& job, const FitData& data, Strategy* strategy,
                              const FitOptions& options) {
  return FitRun(job, data, strategy, options).Run();
}

}  // namespace pstrain
