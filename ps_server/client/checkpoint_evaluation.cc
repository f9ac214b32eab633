#include "ps_server/client/checkpoint_evaluation.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/data/data_spec.h"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::Status CheckpointWeights::CheckShape(size_t index) const {
  const VariableSpec& spec = model_->variables()[index];
  absl::StatusOr<std::vector<int64_t>> shape = checkpoint_->Shape(spec.name);
  if (shape.ok() && *shape == spec.shape) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint ", checkpoint_->path(), " does not fit its model: variable ", spec.name,
      shape.ok() ? absl::StrCat(" is ", ShapeToString(*shape), ", the model wants ",
                                ShapeToString(spec.shape))
                 : " is missing"));
}

absl::StatusOr<std::vector<Tensor>> CheckpointWeights::ReadVariables(bool skip_table) {
  std::vector<Tensor> weights;
  for (size_t i = 0; i < model_->variables().size(); ++i) {
    PS_RETURN_IF_ERROR(CheckShape(i));
    if (i == 0 && skip_table) {
      weights.emplace_back();
      continue;
    }
    PS_ASSIGN_OR_RETURN(Tensor t, checkpoint_->ReadTensor(model_->variables()[i].name));
    weights.push_back(std::move(t));
  }
  return weights;
}

absl::StatusOr<std::unique_ptr<SparseEmbedding>> CheckpointWeights::TableRows(const Model& model) {
  PS_RETURN_IF_ERROR(CheckShape(0));
  const VariableSpec& spec = model_->variables()[0];
  VariableLayout table{spec.name, spec.shape, {}};
  const CheckpointReader* checkpoint = checkpoint_;
  if (checkpoint->sharded_manifest() == nullptr) {
    // Loaded whole already (version 1): rows copied from memory.
    PS_ASSIGN_OR_RETURN(const Tensor* whole, checkpoint->Get(spec.name));
    const int64_t width = spec.shape[1];
    return SparseEmbedding::CreateWithRowReader(
        model, std::move(table),
        [whole, width](const std::vector<int64_t>& ids, float* out) -> absl::Status {
          for (size_t i = 0; i < ids.size(); ++i) {
            std::copy_n(whole->data() + ids[i] * width, width, out + i * width);
          }
          return absl::OkStatus();
        });
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ShardRowReader> rows,
                      ShardRowReader::Open(checkpoint->path(), *checkpoint->sharded_manifest(),
                                           spec.name));
  table_ = std::move(rows);
  std::shared_ptr<const ShardRowReader> reader = table_;
  return SparseEmbedding::CreateWithRowReader(
      model, std::move(table),
      [reader](const std::vector<int64_t>& ids, float* out) { return reader->ReadRows(ids, out); });
}

namespace {

// "test" and "validation" name the job's validation data, "train" its training data.
absl::StatusOr<std::string> EvaluationDataSource(const std::string& data) {
  if (data == "test" || data == "validation") return std::string("validation");
  if (data == "train") return std::string("train");
  return absl::InvalidArgumentError(
      absl::StrCat("--data must be test, validation or train, not \"", data, "\""));
}

}  // namespace

absl::StatusOr<JobEvaluation> PrepareJobEvaluation(const JobSpec& job, const std::string& job_dir,
                                                   const std::string& data,
                                                   const std::string& where) {
  PS_ASSIGN_OR_RETURN(const std::string source, EvaluationDataSource(data));
  if (!job.data->is_object() || !job.data->contains(source)) {
    return absl::NotFoundError(
        absl::StrCat("the job in ", where, " has no data.", source, " to evaluate on"));
  }
  JobEvaluation evaluation;
  evaluation.backend = CreateCpuBackend();
  PS_ASSIGN_OR_RETURN(evaluation.model,
                      Model::FromKerasJson(job.model, evaluation.backend.get()));
  PS_RETURN_IF_ERROR(evaluation.model->SetLoss(job.loss));
  PS_ASSIGN_OR_RETURN(evaluation.data,
                      LoadJobDataset((*job.data)[source], job_dir, absl::StrCat("data.", source),
                                     job.one_hot_labels));
  return evaluation;
}

absl::StatusOr<EvaluationResult> CheckEvaluated(EvaluationResult result, const std::string& data) {
  if (result.samples == 0) {
    return absl::InvalidArgumentError(absl::StrCat("the ", data, " data holds no examples"));
  }
  return result;
}

absl::StatusOr<EvaluationResult> EvaluateCheckpoint(const CheckpointReader& checkpoint,
                                                    const std::string& data) {
  const nlohmann::json& metadata = checkpoint.metadata();
  const std::string job_dir = metadata.contains("job_dir") && metadata["job_dir"].is_string()
                                  ? metadata["job_dir"].get<std::string>()
                                  : ".";
  absl::StatusOr<JobSpec> job = ParseJobSpec(checkpoint.job_spec().dump(), job_dir);
  if (!job.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", checkpoint.path(), ": its job spec: ", job.status().message()));
  }
  PS_ASSIGN_OR_RETURN(JobEvaluation evaluation,
                      PrepareJobEvaluation(*job, job_dir, data, checkpoint.path()));
  CheckpointWeights weights(&checkpoint, evaluation.model.get());
  ShardedEvaluator evaluator(evaluation.model.get(), &weights);
  PS_ASSIGN_OR_RETURN(EvaluationResult result,
                      evaluator.Evaluate(evaluation.data, kCheckpointEvaluationBatch));
  return CheckEvaluated(result, data);
}

}  // namespace pstrain
