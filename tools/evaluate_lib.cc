#include "tools/evaluate_lib.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/data_spec.h"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

namespace {

// "test" and "validation" name the job's validation data, "train" its training data.
absl::StatusOr<std::string> DataSource(const std::string& data) {
  if (data == "test" || data == "validation") return std::string("validation");
  if (data == "train") return std::string("train");
  return absl::InvalidArgumentError(
      absl::StrCat("--data must be test, validation or train, not \"", data, "\""));
}

// Mean loss and accuracy of `weights` (one per model variable) on the job's `source` data.
absl::StatusOr<EvaluationResult> EvaluateWeights(const JobSpec& job, const std::string& job_dir,
                                                 const std::string& source,
                                                 const std::string& where,
                                                 const std::vector<Tensor>& weights) {
  if (!job.data.is_object() || !job.data.contains(source)) {
    return absl::NotFoundError(
        absl::StrCat("the job in ", where, " has no data.", source, " to evaluate on"));
  }
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      Model::FromKerasJson(job.model, backend.get()));
  PS_RETURN_IF_ERROR(model->SetLoss(job.loss));
  PS_ASSIGN_OR_RETURN(Dataset dataset,
                      LoadJobDataset(job.data[source], job_dir, absl::StrCat("data.", source),
                                     job.one_hot_labels));
  PS_ASSIGN_OR_RETURN(EvaluationResult result,
                      EvaluateOn(model.get(), weights, dataset, /*batch_size=*/1000));
  if (result.samples == 0) {
    return absl::InvalidArgumentError(absl::StrCat("data.", source, " holds no examples"));
  }
  return result;
}

}  // namespace

absl::StatusOr<EvaluationResult> EvaluateCheckpoint(const CheckpointReader& checkpoint,
                                                    const std::string& data) {
  PS_ASSIGN_OR_RETURN(const std::string source, DataSource(data));
  const nlohmann::json& metadata = checkpoint.metadata();
  const std::string job_dir = metadata.contains("job_dir") && metadata["job_dir"].is_string()
                                  ? metadata["job_dir"].get<std::string>()
                                  : ".";
  absl::StatusOr<JobSpec> job = ParseJobSpec(checkpoint.job_spec().dump(), job_dir);
  if (!job.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", checkpoint.path(), ": its job spec: ", job.status().message()));
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      Model::FromKerasJson(job->model, /*backend=*/nullptr));
  std::vector<Tensor> weights;
  for (const VariableSpec& spec : model->variables()) {
    absl::StatusOr<const Tensor*> t = checkpoint.Get(spec.name);
    if (!t.ok() || (*t)->shape() != spec.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", checkpoint.path(), " does not fit its model: variable ", spec.name,
          t.ok() ? absl::StrCat(" is ", (*t)->ShapeString(), ", the model wants ",
                                ShapeToString(spec.shape))
                 : " is missing"));
    }
    weights.push_back(**t);
  }
  return EvaluateWeights(*job, job_dir, source, checkpoint.path(), weights);
}

absl::StatusOr<EvaluationResult> EvaluateKerasJob(const JobSpec& job, const std::string& job_dir,
                                                  const std::string& data) {
  PS_ASSIGN_OR_RETURN(const std::string source, DataSource(data));
  if (job.initial_weights == nullptr) {
    return absl::InvalidArgumentError(
        "the job's \"model\" is not a .keras file: there are no weights to evaluate");
  }
  return EvaluateWeights(job, job_dir, source, "the job spec", *job.initial_weights);
}

}  // namespace pstrain
