#include "tools/evaluate_lib.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/data_spec.h"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<EvaluationResult> EvaluateCheckpoint(const CheckpointReader& checkpoint,
                                                    const std::string& data) {
  std::string source;
  if (data == "test" || data == "validation") {
    source = "validation";
  } else if (data == "train") {
    source = "train";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--data must be test, validation or train, not \"", data, "\""));
  }
  const nlohmann::json& metadata = checkpoint.metadata();
  const std::string job_dir = metadata.contains("job_dir") && metadata["job_dir"].is_string()
                                  ? metadata["job_dir"].get<std::string>()
                                  : ".";
  absl::StatusOr<JobSpec> job = ParseJobSpec(checkpoint.job_spec().dump(), job_dir);
  if (!job.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", checkpoint.path(), ": its job spec: ", job.status().message()));
  }
  if (!job->data.is_object() || !job->data.contains(source)) {
    return absl::NotFoundError(
        absl::StrCat("the job in ", checkpoint.path(), " has no data.", source, " to evaluate on"));
  }
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      Model::FromKerasJson(job->model, backend.get()));
  PS_RETURN_IF_ERROR(model->SetLoss(job->loss));
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
  PS_ASSIGN_OR_RETURN(Dataset dataset,
                      LoadJobDataset(job->data[source], job_dir, absl::StrCat("data.", source),
                                     job->one_hot_labels));
  PS_ASSIGN_OR_RETURN(EvaluationResult result,
                      EvaluateOn(model.get(), weights, dataset, /*batch_size=*/1000));
  if (result.samples == 0) {
    return absl::InvalidArgumentError(absl::StrCat("data.", source, " holds no examples"));
  }
  return result;
}

}  // namespace pstrain
