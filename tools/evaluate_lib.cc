#include "tools/evaluate_lib.h"

#include <algorithm>
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
  constexpr int64_t kBatch = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  EvaluationResult result;
  for (int64_t start = 0; start < dataset.num_examples(); start += kBatch) {
    const int64_t count = std::min(kBatch, dataset.num_examples() - start);
    PS_ASSIGN_OR_RETURN(Dataset slice, dataset.Slice(start, count));
    PS_ASSIGN_OR_RETURN(StepResult r, model->Evaluate(weights, slice.x, slice.y));
    loss_sum += r.loss_sum;
    correct += r.correct;
    result.samples += r.samples;
  }
  if (result.samples == 0) {
    return absl::InvalidArgumentError(absl::StrCat("data.", source, " holds no examples"));
  }
  result.loss = loss_sum / result.samples;
  result.accuracy = static_cast<double>(correct) / result.samples;
  return result;
}

}  // namespace pstrain
