#ifndef PSTRAIN_COMMON_MODEL_JOB_SPEC_H_
#define PSTRAIN_COMMON_MODEL_JOB_SPEC_H_

// A training job as a user writes it, in Keras's vocabulary:
//
//   {
//     "model": {...Keras model.to_json() object...} | "model.json" | "model.keras" (paths
//              relative to the job file's folder; a Keras 3 .keras file gives the
//              architecture and the weights training starts from, as load_model does),
//     "compile": {"optimizer": "adam" | {"class_name": "Adam", "config": {...}},
//                 "loss": "sparse_categorical_crossentropy" | {"class_name": ..., ...},
//                 "metrics": ["accuracy"]},
//     "fit": {"epochs": 5, "batch_size": 64, "steps_per_epoch": 0, "shuffle": true},
//     "data": {...opaque here, read by common/data...},
//     "strategy": "parameter_server",
//     "consistency": {...common/training/consistency_config.h...},
//     "placement": {...common/sharding/placement_policy.h...},
//     "nonfinite": "error" | "skip",
//     "wire_dtype": "float32" | "bfloat16" | "float16",
//     "overlap": false | true,
//     "seed": 42
//   }
//
// Required: "model" and "compile.loss" (for a .keras model, "compile" may be left out: its
// compile_config's optimizer, loss and metrics are used, as load_model compiles). Defaults: optimizer "rmsprop" (Keras's default),
// metrics [], epochs 1, batch_size 32, steps_per_epoch 0 (the whole data set), shuffle
// true, seed 0, strategy "" (the caller's default; else one of parameter_server,
// multi_worker_mirrored, mirrored, default), nonfinite "error" (a gradient holding a NaN
// or an infinity fails the step; "skip" drops the step and counts it; it travels as
// optimizer.nonfinite), data null, consistency async, placement size-balanced (both are
// parameter-server settings, parsed here once with types so no daemon reads them from
// raw JSON). Other top-level keys (e.g.
// "checkpoint") are kept in `raw` for the packages that own them; unknown keys inside
// "compile" and "fit" are errors, so a typo is never silently ignored.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json_value.h"
#include "common/model/loss.h"
#include "common/tensor.h"
#include "common/sharding/placement_policy.h"
#include "common/training/strategy_kind.h"
#include "common/wire_precision.h"
#include "proto/ps.pb.h"

namespace pstrain {

struct JobSpec {
  JsonValue model;  // Keras to_json() object, always inline
  // The weights a .keras "model" held, one per model variable in Model::variables() order,
  // that training starts from instead of drawing them from the seed; null otherwise.
  // Not serialized (SerializeJobSpec): the task that creates the variables reads them.
  std::shared_ptr<const std::vector<Tensor>> initial_weights;
  // That .keras file, as an absolute, normalized path (for ps tasks that read their own
  // rows of it: ReadKerasWeightRows); empty for other models. Set with or without
  // `initial_weights` (ParseJobSpecOptions). Not serialized either.
  std::string initial_weights_file;
  OptimizerConfig optimizer;
  LossConfig loss;
  std::vector<std::string> metrics;  // "accuracy", ...
  int epochs = 1;
  int batch_size = 32;
  int64_t steps_per_epoch = 0;  // 0 = the whole data set per epoch
  bool shuffle = true;
  uint64_t seed = 0;
  JsonValue data;  // opaque, parsed by common/data
  // "strategy": unset leaves the choice to the caller (train's --strategy, the launcher's).
  std::optional<StrategyKind> strategy;
  // "one_hot_labels": class-id labels become one-hot rows when data is loaded (Keras's
  // to_categorical), for losses that need [B, K] targets such as mse.
  bool one_hot_labels = false;
  // "scale_learning_rate": multiply the learning rate by the number of replicas that train
  // in sync (or workers pushing to the ps), the seed's best practice for large global batches.
  bool scale_learning_rate = false;
  // "consistency": how the ps tasks order the workers' pushes. replicas_to_aggregate 0
  // means every worker; the chief resolves it (ResolveConsistency) for its cluster.
  ConsistencyConfig consistency;
  // "placement": how the chief splits the variables and spreads them over the ps tasks.
  PlacementPolicy placement;
  // "wire_dtype": how the workers' dense pushes and the values pulled back with them
  // travel to and from the ps tasks ("float32", the default; "bfloat16" or "float16":
  // half the bytes, error feedback on the pushes; common/wire_precision.h).
  WirePrecision wire_precision = WirePrecision::kFloat32;
  // "overlap": a parameter-server worker pushes a step's gradients and, while that
  // exchange is in flight, computes the next step's on the values the previous exchange
  // brought back (PsTrainer::SetOverlap): bounded staleness 1 from its own pushes. Refused
  // with "sync" consistency (which must stay exact) and with bounded_staleness of
  // staleness 0. Default false.
  bool overlap = false;
  JsonValue raw;  // the whole job as given, with "model" inlined
};

// Parses and validates a job spec (the model is checked by building it without a backend).
// Errors: INVALID_ARGUMENT (one line naming the key) for malformed JSON, a missing "model"
// or "compile.loss", a wrong type or range, an unknown optimizer/loss/metric, or an
// unsupported model; NOT_FOUND when the model file cannot be read.
absl::StatusOr<JobSpec> ParseJobSpec(const std::string& json_text, const std::string& base_dir);

struct ParseJobSpecOptions {
  // false: a .keras model's weights are not read (initial_weights stays null; its file
  // is in initial_weights_file): the chief, whose ps tasks read their own rows of it.
  bool read_initial_weights = true;
};
absl::StatusOr<JobSpec> ParseJobSpec(const std::string& json_text, const std::string& base_dir,
                                     const ParseJobSpecOptions& options);

// JSON text that ParseJobSpec reads back to an equal JobSpec (the model inlined, the
// optimizer and loss as Keras config dicts), so a chief can send a worker its job.
std::string SerializeJobSpec(const JobSpec& spec);

// fit.batch_size as Keras's fit reads it under each strategy, for the line every run prints
// at start. The synchronous strategies (default, mirrored, multi_worker_mirrored) take it
// as the global batch, split across the replicas in sync: "global batch 64 (32 per
// replica x 2)", or "(21-22 per replica x 3)" when it does not divide. The
// parameter-server strategy gives it to each worker: "batch 64 per worker (128 per round
// of 2 workers)". `replicas`, `workers` >= 1.
std::string DescribeGlobalBatch(int batch_size, int replicas);
std::string DescribePerWorkerBatch(int batch_size, int workers);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_JOB_SPEC_H_
