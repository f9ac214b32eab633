#include "worker/fit.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data/batcher.h"
#include "common/data/data_spec.h"
#include "common/math/cpu_backend.h"
#include "common/model/model.h"
#include "common/model/optimizer.h"
#include "common/status_macros.h"

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
  const std::string prefix = "the restored state does not fit the model: ";
  if (state.epochs_done < 0 || state.global_step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "negative epoch or step"));
  }
  std::map<std::string, const FitVariableState*> by_name;
  for (const FitVariableState& v : state.variables) by_name[v.name] = &v;
  std::vector<const FitVariableState*> found(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    auto it = by_name.find(specs[i].name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "no variable ", specs[i].name));
    }
    const FitVariableState& v = *it->second;
    if (v.value.shape() != (*weights)[i].shape()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, v.name, " is ", v.value.ShapeString(),
                                                     " there, ", (*weights)[i].ShapeString(),
                                                     " in the model"));
    }
    if (v.iterations < 0) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, v.name, " has negative iterations"));
    }
    for (const NamedTensor& slot : v.slots) {
      if ((*states)[i]->slot(slot.name) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            prefix, v.name, " has optimizer slot \"", slot.name,
            "\", which this job's optimizer does not keep (another optimizer?)"));
      }
      if (slot.tensor.shape() != v.value.shape()) {
        return absl::InvalidArgumentError(absl::StrCat(prefix, "slot ", slot.name, " of ", v.name,
                                                       " is ", slot.tensor.ShapeString()));
      }
    }
    found[i] = &v;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const FitVariableState& v = *found[i];
    (*weights)[i] = v.value;
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
    FitVariableState v;
    v.name = specs[i].name;
    v.value = weights[i];
    v.iterations = states[i]->iterations();
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

absl::StatusOr<FitResult> Fit(const JobSpec& job, const FitData& data, Strategy* strategy,
                              const FitOptions& options) {
  if (strategy == nullptr) return absl::InvalidArgumentError("Fit: no strategy");
  const int replicas = strategy->num_replicas_in_sync();
  if (replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat("strategy ", strategy->name(), " has ",
                                                   replicas, " replicas"));
  }
  // Replicas [local_begin, local_begin + local_count) run here; a multi-worker strategy
  // runs the rest in other processes and sums them in with CrossWorkerSum.
  const int local_begin = strategy->first_local_replica();
  const int local_count = strategy->num_local_replicas();
  if (local_count < 1 || local_begin < 0 || local_begin + local_count > replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy ", strategy->name(), " runs replicas [", local_begin, ", ",
        local_begin + local_count, ") of ", replicas));
  }
  const bool multi_worker = local_count != replicas;
  const int epochs = options.epochs > 0 ? options.epochs : job.epochs;
  if (epochs < 1) return absl::InvalidArgumentError(absl::StrCat("epochs ", epochs, " < 1"));
  if (data.train == nullptr) return absl::InvalidArgumentError("Fit: no training data");
  const bool scale_lr = job.scale_learning_rate;

  // One backend and model per replica: neither may be shared between threads.
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Model>> models;
  for (int r = 0; r < local_count; ++r) {
    std::unique_ptr<Backend> backend;
    if (options.make_backend) {
      PS_ASSIGN_OR_RETURN(backend, options.make_backend(r));
      if (backend == nullptr) return absl::InternalError("backend factory returned null");
    } else {
      backend = CreateCpuBackend();
    }
    PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                        Model::FromKerasJson(job.model, backend.get()));
    PS_RETURN_IF_ERROR(model->SetLoss(job.loss));
    backends.push_back(std::move(backend));
    models.push_back(std::move(model));
  }
  // Evaluation gets its own model (on replica 0's backend, used only between epochs) so
  // its batch sizes do not make the training models reallocate their buffers.
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> eval_model,
                      Model::FromKerasJson(job.model, backends[0].get()));
  PS_RETURN_IF_ERROR(eval_model->SetLoss(job.loss));

  PS_RETURN_IF_ERROR(CheckData(*data.train, *models[0], job, "data.train"));
  if (data.validation != nullptr) {
    PS_RETURN_IF_ERROR(CheckData(*data.validation, *models[0], job, "data.validation"));
  }

  PS_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, Optimizer::Create(job.optimizer));
  if (scale_lr && replicas > 1) {
    OptimizerConfig scaled = optimizer->config();
    scaled.set_learning_rate(scaled.learning_rate() * static_cast<float>(replicas));
    PS_ASSIGN_OR_RETURN(optimizer, Optimizer::Create(scaled));
  }

  FitResult result;
  result.weights = models[0]->InitialValues(job.seed);
  std::vector<std::unique_ptr<OptimizerState>> states;
  for (const Tensor& w : result.weights) states.push_back(optimizer->NewState(w.num_elements()));
  const size_t num_vars = result.weights.size();
  std::vector<std::vector<Tensor>> grads(replicas);
  std::vector<StepResult> step_results(replicas);
  std::vector<Tensor> slice_x(replicas), slice_y(replicas);
  std::vector<int64_t> slice_rows(replicas);

  // Validation batches are cut once; they do not change between epochs.
  std::vector<Batch> val_batches;
  if (data.validation != nullptr) {
    BatcherOptions vo;
    vo.batch_size = job.batch_size;
    PS_ASSIGN_OR_RETURN(std::unique_ptr<Batcher> vb, Batcher::Create(data.validation, vo));
    while (true) {
      absl::StatusOr<Batch> b = vb->Next();
      if (absl::IsOutOfRange(b.status())) break;
      if (!b.ok()) return b.status();
      val_batches.push_back(*std::move(b));
    }
  }

  // A restored state replaces the fresh weights and optimizer state; training continues
  // with the epoch after the last one it finished.
  const std::vector<VariableSpec>& specs = models[0]->variables();
  int first_epoch = 0;
  bool restored = false;
  if (multi_worker) {
    PS_ASSIGN_OR_RETURN(restored, BroadcastRestore(strategy, options.restore, specs,
                                                   &result.weights, &states, &first_epoch,
                                                   &result.steps));
  } else if (options.restore != nullptr) {
    PS_RETURN_IF_ERROR(ApplyState(*options.restore, specs, &result.weights, &states));
    first_epoch = options.restore->epochs_done;
    result.steps = options.restore->global_step;
    restored = true;
  }
  if (restored && options.on_restored) options.on_restored(first_epoch, result.steps);

  const int64_t n = data.train->num_examples();
  std::vector<std::vector<float>> reduced(num_vars);
  auto check_in_sync = [&]() -> absl::Status {
    if (!multi_worker) return absl::OkStatus();
    std::vector<absl::Span<const float>> w;
    for (const Tensor& t : result.weights) w.push_back(t.values());
    return strategy->CheckInSync(w);
  };
  // Before the first step: every worker starts from the same weights (and this first
  // collective is where the workers meet).
  PS_RETURN_IF_ERROR(check_in_sync());
  for (int epoch = first_epoch; epoch < epochs; ++epoch) {
    const absl::Time start = absl::Now();
    BatcherOptions bo;
    bo.batch_size = job.batch_size;
    bo.shuffle_buffer = job.shuffle ? n : 0;
    // The same per-epoch seed as the ps-mode worker's shard 0 uses.
    bo.seed = job.seed * 1000003 + static_cast<uint64_t>(epoch) * 8191;
    // With steps_per_epoch the data repeats, as Keras does with a repeated tf.data dataset.
    bo.epochs = job.steps_per_epoch > 0 ? -1 : 1;
    bo.prefetch = options.prefetch;
    PS_ASSIGN_OR_RETURN(std::unique_ptr<Batcher> batcher, Batcher::Create(data.train, bo));
    const int64_t steps =
        job.steps_per_epoch > 0 ? job.steps_per_epoch : batcher->batches_per_epoch();

    StepResult totals;
    int64_t steps_taken = 0;
    for (int64_t step = 0; step < steps; ++step) {
      const StepResult before = totals;
      absl::StatusOr<Batch> batch = batcher->Next();
      if (absl::IsOutOfRange(batch.status())) break;
      if (!batch.ok()) return batch.status();
      const int64_t rows = batch->x.shape()[0];
      if (replicas > 1) {
        for (int r = local_begin; r < local_begin + local_count; ++r) {
          const int64_t begin = rows * r / replicas;
          const int64_t end = rows * (r + 1) / replicas;
          slice_rows[r] = end - begin;
          slice_x[r] = Rows(batch->x, begin, end - begin);
          slice_y[r] = Rows(batch->y, begin, end - begin);
        }
      } else {
        slice_rows[0] = rows;
      }
      const int64_t global_step = result.steps;
      PS_RETURN_IF_ERROR(strategy->Run([&](int r) -> absl::Status {
        if (r < local_begin || r >= local_begin + local_count) {
          return absl::InternalError(absl::StrCat("strategy ran replica ", r));
        }
        if (slice_rows[r] == 0) {  // a short last batch leaves a replica nothing to do
          grads[r].resize(num_vars);
          for (size_t v = 0; v < num_vars; ++v) grads[r][v] = Tensor(result.weights[v].shape());
          step_results[r] = StepResult();
          return absl::OkStatus();
        }
        const Tensor& x = replicas > 1 ? slice_x[r] : batch->x;
        const Tensor& y = replicas > 1 ? slice_y[r] : batch->y;
        PS_ASSIGN_OR_RETURN(step_results[r],
                            models[r - local_begin]->TrainStep(result.weights, x, y,
                                                 StepSeed(job.seed, global_step, r), &grads[r]));
        return absl::OkStatus();
      }));
      for (int r = local_begin; r < local_begin + local_count; ++r) {
        totals.loss_sum += step_results[r].loss_sum;
        totals.correct += step_results[r].correct;
        totals.samples += step_results[r].samples;
      }
      if (replicas == 1) {
        for (size_t v = 0; v < num_vars; ++v) {
          optimizer->Apply(grads[0][v].values(), result.weights[v].values(), states[v].get());
        }
      } else {
        // Each replica's gradient is of its slice's mean loss: weight by slice share so
        // the sum is the gradient of the global batch's mean loss.
        for (int r = local_begin; r < local_begin + local_count; ++r) {
          const float share = static_cast<float>(slice_rows[r]) / static_cast<float>(rows);
          for (size_t v = 0; v < num_vars; ++v) {
            for (float& g : grads[r][v].values()) g *= share;
          }
        }
        for (size_t v = 0; v < num_vars; ++v) {
          std::vector<absl::Span<const float>> per_replica;
          for (int r = local_begin; r < local_begin + local_count; ++r) {
            per_replica.push_back(grads[r][v].values());
          }
          PS_ASSIGN_OR_RETURN(reduced[v], strategy->Reduce(ReduceOp::kSum, per_replica));
        }
        if (multi_worker) {
          // One call for all variables, so the all-reduce can fuse them into buckets.
          std::vector<absl::Span<float>> spans;
          for (std::vector<float>& g : reduced) spans.push_back(absl::MakeSpan(g));
          PS_RETURN_IF_ERROR(strategy->CrossWorkerSum(spans));
        }
        for (size_t v = 0; v < num_vars; ++v) {
          optimizer->Apply(reduced[v], result.weights[v].values(), states[v].get());
        }
      }
      ++result.steps;
      ++steps_taken;
      if (options.sync_check_every > 0 && result.steps % options.sync_check_every == 0) {
        PS_RETURN_IF_ERROR(check_in_sync());
      }
      if (options.on_batch) {
        BatchProgress p;
        p.epoch = epoch + 1;
        p.epochs = epochs;
        p.step = step + 1;
        p.steps = steps;
        const double s = static_cast<double>(std::max<int64_t>(totals.samples, 1));
        p.loss = totals.loss_sum / s;
        p.accuracy = static_cast<double>(totals.correct) / s;
        p.global_step = result.steps;
        p.samples = totals.samples - before.samples;
        p.step_loss = (totals.loss_sum - before.loss_sum) /
                      static_cast<double>(std::max<int64_t>(p.samples, 1));
        p.elapsed = absl::Now() - start;
        options.on_batch(p);
      }
    }

    if (multi_worker) {
      // Metrics over every replica of every worker. Floats hold the counts exactly (below
      // 2^24 samples an epoch) and the loss sum to far better than the 4 digits printed.
      std::vector<float> sums = {static_cast<float>(totals.loss_sum),
                                 static_cast<float>(totals.correct),
                                 static_cast<float>(totals.samples)};
      std::vector<absl::Span<float>> spans = {absl::MakeSpan(sums)};
      PS_RETURN_IF_ERROR(strategy->CrossWorkerSum(spans));
      totals.loss_sum = sums[0];
      totals.correct = static_cast<int64_t>(sums[1]);
      totals.samples = static_cast<int64_t>(sums[2]);
      PS_RETURN_IF_ERROR(check_in_sync());
    }
    EpochSummary summary;
    summary.epoch = epoch + 1;
    summary.epochs = epochs;
    summary.samples = totals.samples;
    summary.steps = steps_taken;
    const double s = static_cast<double>(std::max<int64_t>(totals.samples, 1));
    summary.loss = totals.loss_sum / s;
    summary.accuracy = static_cast<double>(totals.correct) / s;
    if (data.validation != nullptr) {
      StepResult val;
      for (const Batch& b : val_batches) {
        PS_ASSIGN_OR_RETURN(StepResult r, eval_model->Evaluate(result.weights, b.x, b.y));
        val.loss_sum += r.loss_sum;
        val.correct += r.correct;
        val.samples += r.samples;
      }
      const double vs = static_cast<double>(std::max<int64_t>(val.samples, 1));
      summary.has_validation = true;
      summary.val_loss = val.loss_sum / vs;
      summary.val_accuracy = static_cast<double>(val.correct) / vs;
    }
    summary.elapsed = absl::Now() - start;
    result.history.push_back(summary);
    const bool go_on = !options.on_epoch || options.on_epoch(summary);
    // After the epoch line, as the chief does; an epoch that stops training is kept too.
    if (options.on_checkpoint) {
      PS_RETURN_IF_ERROR(options.on_checkpoint(
          CurrentState(epoch + 1, result.steps, specs, result.weights, states)));
    }
    if (!go_on) break;
  }
  return result;
}

}  // namespace pstrain
