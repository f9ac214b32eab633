#include "pstrain/fit.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data/data_spec.h"
#include "common/status_macros.h"
#include "common/training/evaluator.h"
#include "common/training/strategy_kind.h"
#include "nlohmann/json.hpp"
#include "pstrain/distributed_model.h"
#include "pstrain/replica.h"

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

using distribute::DistributedBatch;
using distribute::DistributedDataset;
using distribute::DistributedDatasetOptions;
using distribute::DistributedIterator;
using distribute::DistributedModel;
using distribute::Gradients;
using distribute::ModelOptions;
using distribute::PerReplica;
using distribute::ReduceOp;
using distribute::ReplicaBatch;
using distribute::ReplicaContext;

// One call of Fit: its named steps and the state they share, all through the public
// Strategy and the DistributedModel it makes.
class FitRun {
 public:
  FitRun(const JobSpec& job, const FitData& data, distribute::Strategy* strategy,
         const FitOptions& options)
      : job_(job), data_(data), strategy_(strategy), options_(options) {}

  absl::StatusOr<FitResult> Run() {
    PS_RETURN_IF_ERROR(CheckArguments());
    PS_RETURN_IF_ERROR(BuildModel());
    PS_RETURN_IF_ERROR(RestoreState());
    // Before the first step: every worker starts from the same weights.
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
        PS_ASSIGN_OR_RETURN(const TrainingState state, model_->GetState(epoch + 1, result_.steps));
        PS_RETURN_IF_ERROR(options_.on_checkpoint(state));
      }
      if (!go_on) break;
    }
    PS_ASSIGN_OR_RETURN(result_.weights, model_->GetWeights());
    result_.nonfinite_skipped = model_->skipped_updates();
    return std::move(result_);
  }

 private:
  // The strategy and the epochs, before anything is built.
  absl::Status CheckArguments() {
    if (strategy_ == nullptr) return absl::InvalidArgumentError("Fit: no strategy");
    if (strategy_->kind() == StrategyKind::kParameterServer) {
      return absl::InvalidArgumentError(
          "Fit runs default, mirrored and multi_worker_mirrored; under parameter_server the "
          "chief schedules steps with a ClusterCoordinator");
    }
    epochs_ = options_.epochs > 0 ? options_.epochs : job_.epochs;
    if (epochs_ < 1) return absl::InvalidArgumentError(absl::StrCat("epochs ", epochs_, " < 1"));
    if (data_.train == nullptr) return absl::InvalidArgumentError("Fit: no training data");
    return absl::OkStatus();
  }

  // The model in the strategy's scope (its replicas, weights and optimizer), then checks
  // that the data fits it, and the distributed training data.
  absl::Status BuildModel() {
    ModelOptions mo = ModelOptions::FromJobSpec(job_);
    mo.batch_size = job_.batch_size;
    PS_ASSIGN_OR_RETURN(model_, strategy_->CreateModel(mo));
    PS_RETURN_IF_ERROR(model_->CheckData(*data_.train, "data.train"));
    if (data_.validation != nullptr) {
      PS_RETURN_IF_ERROR(model_->CheckData(*data_.validation, "data.validation"));
    }
    DistributedDatasetOptions dd;
    dd.global_batch_size = job_.batch_size;
    dd.shuffle = job_.shuffle;
    dd.seed = job_.seed;
    // With steps_per_epoch the data repeats, as Keras does with a repeated tf.data dataset.
    dd.repeat = job_.steps_per_epoch > 0 ? -1 : 1;
    dd.prefetch = options_.prefetch;
    PS_ASSIGN_OR_RETURN(train_, strategy_->ExperimentalDistributeDataset(data_.train, dd));
    return absl::OkStatus();
  }

  // A restored state replaces the fresh weights and optimizer state; training continues
  // with the epoch after the last one it finished.
  absl::Status RestoreState() {
    PS_ASSIGN_OR_RETURN(const bool restored,
                        model_->RestoreState(options_.restore, &first_epoch_, &result_.steps));
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
    int first_replica = 0;
    int64_t steps_taken = 0;
    for (int64_t step = 0; step < steps; ++step) {
      const StepResult before = totals;
      absl::StatusOr<DistributedBatch> batch = batches->Next();
      if (absl::IsOutOfRange(batch.status())) break;
      if (!batch.ok()) return batch.status();
      first_replica = batch->first_replica;
      PS_RETURN_IF_ERROR(TrainStep(*batch, &totals));
      ++steps_taken;
      if (options_.sync_check_every > 0 && result_.steps % options_.sync_check_every == 0) {
        PS_RETURN_IF_ERROR(model_->CheckInSync());
      }
      if (options_.on_batch) ReportProgress(epoch, step, steps, before, totals, start);
    }
    // This process's figures (its replicas', added step by step in replica order) as one
    // value, to which Reduce adds every other worker's: one all-reduce per epoch, not one
    // per step. One process: Reduce gives them back unchanged.
    PerReplica<StepResult> local;
    local.first_replica = first_replica;
    local.values.push_back(totals);
    PS_ASSIGN_OR_RETURN(totals, strategy_->Reduce(ReduceOp::kSum, local));
    PS_RETURN_IF_ERROR(model_->CheckInSync());
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

  // One optimizer step on the global batch `batch` (strategy->Run): every local replica
  // computes the gradient of its slice and hands it to ApplyGradients; the strategy takes
  // the one update from all of them when Run returns. The local replicas' figures are
  // added to `totals`.
  absl::Status TrainStep(const DistributedBatch& batch, StepResult* totals) {
    PS_ASSIGN_OR_RETURN(
        const PerReplica<StepResult> figures,
        strategy_->Run(
            [this](const ReplicaContext& ctx, const ReplicaBatch& slice) -> absl::StatusOr<StepResult> {
              PS_ASSIGN_OR_RETURN(Gradients gradients, model_->ComputeGradients(ctx, slice));
              const StepResult metrics = gradients.metrics;
              PS_RETURN_IF_ERROR(model_->ApplyGradients(ctx, std::move(gradients)));
              return metrics;
            },
            batch));
    for (const StepResult& r : figures.values) {
      totals->loss_sum += r.loss_sum;
      totals->correct += r.correct;
      totals->samples += r.samples;
    }
    ++result_.steps;
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
  distribute::Strategy* const strategy_;  // Not owned.
  const FitOptions& options_;
  int epochs_ = 0;
  int first_epoch_ = 0;
  std::unique_ptr<DistributedModel> model_;
  std::unique_ptr<DistributedDataset> train_;
  FitResult result_;
};

}  // namespace

absl::StatusOr<FitResult> Fit(const JobSpec& job, const FitData& data,
                              distribute::Strategy* strategy, const FitOptions& options) {
  return FitRun(job, data, strategy, options).Run();
}

}  // namespace pstrain
