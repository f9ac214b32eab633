#ifndef PSTRAIN_PS_SERVER_CLIENT_CHECKPOINT_EVALUATION_H_
#define PSTRAIN_PS_SERVER_CLIENT_CHECKPOINT_EVALUATION_H_

// A checkpoint evaluated from its files with ShardedEvaluator's loop, in bounded memory:
// what the evaluator task (TF_CONFIG's "evaluator", chief/evaluator_task.h) does for each
// new checkpoint and `tools/evaluate --checkpoint` does once, so both print the same
// figures. A version-2 (sharded) checkpoint opened without its tensors
// (CheckpointReader::OpenOptions::load_sharded_tensors = false) gives its dense variables
// read whole from the shard files, and of an Embedding table only each validation batch's
// rows (ShardRowReader: every block of the table verified once, then row by row); a
// version-1 checkpoint, or one loaded whole, is evaluated from memory the same way.
//
// Thread-safety: CheckpointWeights as ShardedEvaluator (one caller at a time);
// EvaluateCheckpoint from any thread.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/shard_files.h"
#include "common/data/dataset.h"
#include "common/math/backend.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "common/training/evaluator.h"
#include "ps_server/client/sharded_evaluator.h"

namespace pstrain {

// The weights of `checkpoint` for `model`. Neither is owned; both must outlive this.
class CheckpointWeights : public EvaluationWeights {
 public:
  CheckpointWeights(const CheckpointReader* checkpoint, const Model* model)
      : checkpoint_(checkpoint), model_(model) {}

  // Errors: INVALID_ARGUMENT a variable missing or of another shape than the model's
  //         (both named); DATA_LOSS a shard file that fails its checks (named).
  absl::StatusOr<std::vector<Tensor>> ReadVariables(bool skip_table) override;
  // Errors: as ReadVariables, for the table; a corrupt block of it (verified here, once).
  absl::StatusOr<std::unique_ptr<SparseEmbedding>> TableRows(const Model& model) override;

 private:
  // The checkpoint's shape of model variable `index`, checked against the model's.
  absl::Status CheckShape(size_t index) const;

  const CheckpointReader* const checkpoint_;  // Not owned.
  const Model* const model_;                  // Not owned.
  std::shared_ptr<const ShardRowReader> table_;
};

// The evaluation batch of the chief, the evaluator task and tools/evaluate.
inline constexpr int64_t kCheckpointEvaluationBatch = 1000;

// Evaluates the weights of `checkpoint` on one of its job's data sources, in this process
// on the CPU backend (no cluster): builds the model from the job spec the checkpoint
// stores, sets its loss, loads `data` ("test" or "validation": the job's validation data;
// "train": its training data; relative paths against the job folder recorded in the
// checkpoint's metadata) and reports the mean loss and accuracy.
// Errors: INVALID_ARGUMENT an unknown `data`, a job spec that does not parse, weights that
//         do not fit the model; NOT_FOUND the job has no such data source; DATA_LOSS a
//         shard file that fails its checks; the data loader's errors.
absl::StatusOr<EvaluationResult> EvaluateCheckpoint(const CheckpointReader& checkpoint,
                                                    const std::string& data);

// What evaluating any weights of a job needs: its model on the CPU backend with its loss,
// and its `data` source loaded ("test" or "validation": the job's validation data;
// "train": its training data; relative paths against `job_dir`).
struct JobEvaluation {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;  // on `backend`
  Dataset data;
};
// Errors: INVALID_ARGUMENT an unknown `data`, a model that does not parse; NOT_FOUND the
//         job has no such data source (the job named as `where`); the data loader's.
absl::StatusOr<JobEvaluation> PrepareJobEvaluation(const JobSpec& job, const std::string& job_dir,
                                                   const std::string& data,
                                                   const std::string& where);

// INVALID_ARGUMENT when `result` counted no examples of `data`; else `result`.
absl::StatusOr<EvaluationResult> CheckEvaluated(EvaluationResult result, const std::string& data);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_CHECKPOINT_EVALUATION_H_
