#include "distribute/fit.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data/data_spec.h"
#include "common/status_macros.h"
#include "common/training/evaluator.h"
#include "distribute/distributed_dataset.h"
#include "distribute/replicated_model.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

absl::StatusOr<std::shared_ptr<const Dataset>> LoadOne(const nlohmann::json& source,
                                                       const std::string& base_dir,
                                                       const std::string& what, bool one_hot) {
  PS_ASSIGN_OR_RETURN(Dataset loaded, LoadJobDataset(source, base_dir, what, one_hot));
  return std::make_shared<const Dataset>(std::move(loaded));
}

}  // namespace

absl::StatusOr<FitData> LoadFitData(const JobSpec& job, const std::string& base_dir) {
  const bool one_hot = job.one_hot_labels;
  if (!job.data->is_object() || !job.data->contains("train")) {
    return absl::InvalidArgumentError("job spec: data.train is missing");
  }
  FitData data;
  PS_ASSIGN_OR_RETURN(data.train, LoadOne((*job.data)["train"], base_dir, "data.train", one_hot));
  if (job.data->contains("validation") && !(*job.data)["validation"].is_null()) {
    PS_ASSIGN_OR_RETURN(data.validation, LoadOne((*job.data)["validation"], base_dir,
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
    PS_RETURN_IF_ERROR(BuildModel());
    PS_RETURN_IF_ERROR(RestoreState());
    // Before the first step: every worker starts from the same weights (and this first
    // collective is where the workers meet).
    PS_RETURN_IF_ERROR(model_->CheckInSync());
    for (int epoch = first_epoch_; epoch < epochs_; ++epoch) {
      const absl::Time start = absl::Now();
      PS_ASSIGN_OR_RETURN(EpochSummary summary, TrainEpoch(epoch, start));
      PS_RETURN_IF_ERROR(Validate(&summary));
      summary.elapsed = absl::Now() - start;
      result_.history.push_back(summary);
      const bool go_on = !options_.on_epoch || options_.on_epoch(summary);
      // After the epoch line, as the chief does; an epoch that stops training is kept too.
      if (options_.on_checkpoint) {
        PS_RETURN_IF_ERROR(options_.on_checkpoint(model_->State(epoch + 1, result_.steps)));
      }
      if (!go_on) break;
    }
    result_.weights = model_->weights();
    return std::move(result_);
  }

 private:
  bool multi_worker() const { return local_count_ != replicas_; }

  // The strategy's replicas, the epochs and the data, before anything is built.
  absl::Status CheckArguments() {
    if (strategy_ == nullptr) return absl::InvalidArgumentError("Fit: no strategy");
    replicas_ = strategy_->num_replicas_in_sync();
    local_begin_ = strategy_->first_local_replica();
    local_count_ = strategy_->num_local_replicas();
    epochs_ = options_.epochs > 0 ? options_.epochs : job_.epochs;
    if (epochs_ < 1) return absl::InvalidArgumentError(absl::StrCat("epochs ", epochs_, " < 1"));
    if (data_.train == nullptr) return absl::InvalidArgumentError("Fit: no training data");
    return absl::OkStatus();
  }

  // The replicated model (its replicas' models, weights and optimizer), then checks that
  // the data fits it, and the distributed training data.
  absl::Status BuildModel() {
    ReplicatedModelOptions mo;
    mo.keras_model = job_.model;
    mo.loss = job_.loss;
    mo.optimizer = job_.optimizer;
    mo.seed = job_.seed;
    mo.initial_weights = job_.initial_weights;
    mo.batch_size = job_.batch_size;
    mo.scale_learning_rate = job_.scale_learning_rate;
    mo.make_backend = options_.make_backend;
    PS_ASSIGN_OR_RETURN(model_, ReplicatedModel::Create(strategy_, mo));
    PS_RETURN_IF_ERROR(CheckDataFitsModel(*data_.train, model_->model(), job_.loss, "data.train"));
    if (data_.validation != nullptr) {
      PS_RETURN_IF_ERROR(
          CheckDataFitsModel(*data_.validation, model_->model(), job_.loss, "data.validation"));
    }
    DistributedDatasetOptions dd;
    dd.global_batch_size = job_.batch_size;
    dd.shuffle = job_.shuffle;
    dd.seed = job_.seed;
    // With steps_per_epoch the data repeats, as Keras does with a repeated tf.data dataset.
    dd.repeat = job_.steps_per_epoch > 0 ? -1 : 1;
    dd.prefetch = options_.prefetch;
    PS_ASSIGN_OR_RETURN(train_, DistributedDataset::Create(data_.train, dd, replicas_,
                                                           local_begin_, local_count_));
    slice_rows_.resize(local_count_);
    return absl::OkStatus();
  }

  // A restored state replaces the fresh weights and optimizer state; training continues
  // with the epoch after the last one it finished.
  absl::Status RestoreState() {
    PS_ASSIGN_OR_RETURN(const bool restored,
                        model_->Restore(options_.restore, &first_epoch_, &result_.steps));
    if (restored && options_.on_restored) options_.on_restored(first_epoch_, result_.steps);
    return absl::OkStatus();
  }

  // Epoch `epoch` (0-based): the training data reshuffled with a seed of (job seed,
  // epoch), full passes or steps_per_epoch global batches of a repeating stream; one step
  // per batch; the figures summed over every replica of every worker. `start` is when the
  // epoch began (progress reports count from it).
  absl::StatusOr<EpochSummary> TrainEpoch(int epoch, absl::Time start) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<DistributedIterator> batches, train_->MakeIterator(epoch));
    const int64_t steps =
        job_.steps_per_epoch > 0 ? job_.steps_per_epoch : batches->batches_per_epoch();
    StepResult totals;
    int64_t steps_taken = 0;
    for (int64_t step = 0; step < steps; ++step) {
      const StepResult before = totals;
      absl::StatusOr<DistributedBatch> batch = batches->Next();
      if (absl::IsOutOfRange(batch.status())) break;
      if (!batch.ok()) return batch.status();
      PS_RETURN_IF_ERROR(TrainStep(*batch, &totals));
      ++steps_taken;
      if (options_.sync_check_every > 0 && result_.steps % options_.sync_check_every == 0) {
        PS_RETURN_IF_ERROR(model_->CheckInSync());
      }
      if (options_.on_batch) ReportProgress(epoch, step, steps, before, totals, start);
    }
    if (multi_worker()) {
      PS_RETURN_IF_ERROR(SumAcrossWorkers(&totals));
      PS_RETURN_IF_ERROR(model_->CheckInSync());
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

  // One optimizer step on the global batch `batch`: every local replica computes the
  // gradient of its slice (Strategy::Run), then one update from all of them
  // (ReplicatedModel::ApplyGradients); the local replicas' figures are added to `totals`.
  absl::Status TrainStep(const DistributedBatch& batch, StepResult* totals) {
    step_results_.assign(local_count_, StepResult());
    const int64_t global_step = result_.steps;
    PS_RETURN_IF_ERROR(strategy_->Run([&](int r) -> absl::Status {
      if (r < local_begin_ || r >= local_begin_ + local_count_) {
        return absl::InternalError(absl::StrCat("strategy ran replica ", r));
      }
      const ReplicaBatch& slice = batch.replicas[r - local_begin_];
      PS_ASSIGN_OR_RETURN(step_results_[r - local_begin_],
                          model_->ComputeGradients(r, slice.x, slice.y,
                                                   ReplicaDropoutSeed(job_.seed, global_step, r)));
      return absl::OkStatus();
    }));
    for (int i = 0; i < local_count_; ++i) {
      totals->loss_sum += step_results_[i].loss_sum;
      totals->correct += step_results_[i].correct;
      totals->samples += step_results_[i].samples;
      slice_rows_[i] = batch.replicas[i].rows();
    }
    PS_ASSIGN_OR_RETURN(const bool applied,
                        model_->ApplyGradients(slice_rows_, batch.global_batch_size, global_step));
    if (!applied) ++result_.nonfinite_skipped;
    ++result_.steps;
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
    PS_ASSIGN_OR_RETURN(EvaluationResult val,
                        model_->Evaluate(*data_.validation, job_.batch_size));
    summary->has_validation = true;
    summary->val_loss = val.loss;
    summary->val_accuracy = val.accuracy;
    return absl::OkStatus();
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
  std::unique_ptr<ReplicatedModel> model_;
  std::unique_ptr<DistributedDataset> train_;
  FitResult result_;
  // Per-step buffers, by local replica.
  std::vector<StepResult> step_results_;
  std::vector<int64_t> slice_rows_;
};

}  // namespace

absl::StatusOr<FitResult> Fit(const JobSpec& job, const FitData& data, Strategy* strategy,
                              const FitOptions& options) {
  return FitRun(job, data, strategy, options).Run();
}

}  // namespace pstrain
