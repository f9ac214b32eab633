#ifndef PSTRAIN_WORKER_FIT_CHECKPOINT_H_
#define PSTRAIN_WORKER_FIT_CHECKPOINT_H_

// Fit's TrainingState (worker/fit.h) to and from a checkpoint (common/checkpoint), in the
// same layout the parameter-server chief writes (chief/coordinator.cc), so that a mirrored
// job's checkpoint restores into a parameter-server job and the other way round, and
// tools/evaluate and tools/export_safetensors read both:
//   tensors:  "<variable>" (the model's name) and "<variable>/optimizer/<slot>"
//   metadata: "variables": {"<variable>": {"shape", "iterations", "version", "slots",
//             "num_shards": 1}}, "global_step", "epochs_done", "optimizer", plus the
//             caller's keys (e.g. "job_dir", which tools/evaluate resolves data paths
//             against)
//   step = global step, epoch = epochs done, job_spec = the job as it ran.

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"
#include "common/model/job_spec.h"
#include "nlohmann/json.hpp"
#include "worker/fit.h"

namespace pstrain {

// The checkpoint of `state` for `job`; `extra_metadata` (an object, or null) is merged
// into the metadata first, so the keys above win.
CheckpointContents CheckpointFromTrainingState(const TrainingState& state, const JobSpec& job,
                                               const nlohmann::json& extra_metadata);

// The state a checkpoint holds. Variables are those the metadata's "variables" lists (with
// their iterations and slots); a checkpoint without that key gives every tensor whose name
// has no "/optimizer/" part, its "<name>/optimizer/<slot>" tensors as slots and the global
// step as its iterations. Fit checks that the result fits the model.
// Errors: DATA_LOSS a listed variable or slot whose tensor is missing (named), or a
// malformed "variables" entry.
absl::StatusOr<TrainingState> TrainingStateFromCheckpoint(const CheckpointReader& reader);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_FIT_CHECKPOINT_H_
