#ifndef PSTRAIN_COMMON_TRAINING_TRAINING_STATE_H_
#define PSTRAIN_COMMON_TRAINING_TRAINING_STATE_H_

// A job's training state (variables, optimizer slots and counts) and the one layout in
// which every trainer writes it as a checkpoint (common/checkpoint): the parameter-server
// chief and custom loop (ps_server/client/checkpointer.h) and the one-process and mirrored
// trainer (pstrain/fit.h, `train`). So a mirrored job's checkpoint restores into a parameter-server job and the
// other way round, and tools/evaluate and tools/export_safetensors read both:
//   tensors:  "<variable>" (the model's name) and "<variable>/optimizer/<slot>"
//   metadata: "variables": {"<variable>": {"shape", "iterations", "version", "slots",
//             "num_shards"}}, "global_step", "epochs_done", "optimizer", plus the
//             caller's keys (e.g. "job_dir", which tools/evaluate resolves data paths
//             against; the chief's "num_ps" and "data_position")
//   step = global step, epoch = epochs done, job_spec = the job as it ran.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "common/variable_snapshot.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

// Everything a trainer needs to continue a job exactly where it stopped.
struct TrainingState {
  int epochs_done = 0;      // training continues with epoch epochs_done + 1
  int64_t global_step = 0;  // optimizer steps taken (it seeds dropout)
  // Whole variables (never shards), by the model's names.
  std::vector<VariableSnapshot> variables;
};

// The checkpoint of `state` for `job`; `extra_metadata` (an object, or null) is merged
// into the metadata first, so the keys above win. Every variable is recorded with
// "num_shards": 1 unless `num_shards` (by variable name) says how many shards it is kept
// in (the chief's partitioned variables).
CheckpointContents CheckpointFromTrainingState(
    const TrainingState& state, const JobSpec& job, const nlohmann::json& extra_metadata,
    const std::vector<std::pair<std::string, int>>& num_shards = {});

// The header (step, epoch, job spec, metadata; no tensors) of a sharded checkpoint whose
// tensors the ps tasks wrote as `files` (common/checkpoint/shard_files.h): the metadata is
// CheckpointFromTrainingState's, each variable's iterations and version the largest of its
// shards' (as the chief's gather takes them) and its slots its first shard's. `variables`
// are the model's, in its order, with the number of shards each is kept in.
struct ShardedVariableInfo {
  std::string name;
  std::vector<int64_t> shape;
  int num_shards = 1;
};
CheckpointContents ShardedCheckpointHeader(int epochs_done, int64_t global_step,
                                           const JobSpec& job,
                                           const nlohmann::json& extra_metadata,
                                           const std::vector<ShardedVariableInfo>& variables,
                                           const std::vector<ShardFile>& files);

// The state a checkpoint holds. Variables are those the metadata's "variables" lists (with
// their iterations, version and slots); a checkpoint without that key gives every tensor
// whose name has no "/optimizer/" part, its "<name>/optimizer/<slot>" tensors as slots and
// the global step as its iterations. VariablesForModel checks it fits a model.
// Errors: DATA_LOSS a listed variable or slot whose tensor is missing (named), or a
// malformed "variables" entry.
absl::StatusOr<TrainingState> TrainingStateFromCheckpoint(const CheckpointReader& reader);

// `state`'s variables in the order of `model` (a model's variables()), checked
// to fit it: each is there with the model's shape, each slot has that shape, and the
// epoch, step and counts are not negative. `source` names the state in errors ("checkpoint
// /ckpt/ckpt-40", "the restored state"). Whether the slots are the ones the job's optimizer
// keeps is the trainer's to check.
// Errors: INVALID_ARGUMENT "<source> does not fit the model: ..." naming the variable.
absl::StatusOr<std::vector<VariableSnapshot>> VariablesForModel(
    const TrainingState& state, const std::vector<VariableSpec>& model,
    const std::string& source);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_TRAINING_STATE_H_
