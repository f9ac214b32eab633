#include "tools/evaluate_lib.h"

#include "common/status_macros.h"
#include "ps_server/client/checkpoint_evaluation.h"

namespace pstrain {

absl::StatusOr<EvaluationResult> EvaluateKerasJob(const JobSpec& job, const std::string& job_dir,
                                                  const std::string& data) {
  if (job.initial_weights == nullptr) {
    return absl::InvalidArgumentError(
        "the job's \"model\" is not a .keras file: there are no weights to evaluate");
  }
  PS_ASSIGN_OR_RETURN(JobEvaluation evaluation,
                      PrepareJobEvaluation(job, job_dir, data, "the job spec"));
  PS_ASSIGN_OR_RETURN(EvaluationResult result,
                      EvaluateOn(evaluation.model.get(), *job.initial_weights, evaluation.data,
                                 kCheckpointEvaluationBatch));
  return CheckEvaluated(result, data);
}

}  // namespace pstrain
