#ifndef PSTRAIN_COMMON_CHECKPOINT_KERAS_EXPORT_H_
#define PSTRAIN_COMMON_CHECKPOINT_KERAS_EXPORT_H_

// A checkpoint as a Keras 3 `.keras` file (what `model.save("model.keras")` writes, and
// `keras.saving.load_model` reads): a zip archive holding
//   metadata.json     {"keras_version": ..., "date_saved": "%Y-%m-%d@%H:%M:%S", ...}
//   config.json       the model as Keras 3's serialize_keras_object writes it (module,
//                     class_name, config with every layer's resolved config, registered_name,
//                     build_config) with its compile_config (optimizer, loss, metrics)
//   model.weights.h5  every layer's variables in the layer's order, at Keras's paths
//                     (common/checkpoint/keras_weights_h5.h)
// The model, compile settings and weights come from the checkpoint alone (its job spec
// and tensors). The optimizer's slots and step count are not written (Keras then builds
// a fresh optimizer, as it does for a model saved before training).
//
// Thread-safety: any thread.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/checkpoint/checkpoint.h"
#include "common/model/job_spec.h"
#include "common/tensor.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

// The Keras version whose saving format (keras/src/saving/saving_lib.py) the files follow.
inline constexpr char kKerasFormatVersion[] = "3.3.3";

// OK when `path` ends in ".keras" (Keras 3's load_model opens nothing else); otherwise
// INVALID_ARGUMENT naming `what` (a flag such as "--export_keras=" or empty) and the path.
// The chief and train check their --export_keras with it at start, before any training,
// as the exporters below do before writing.
absl::Status CheckKerasPath(absl::string_view path, absl::string_view what = "");

struct KerasExportOptions {
  absl::Time date_saved = absl::Now();
};

// Writes `checkpoint` as a `.keras` file at `out_path` (atomically: temp file, fsync,
// rename).
// Errors: INVALID_ARGUMENT `out_path` does not end in ".keras", or the checkpoint's job
//         spec or model does not parse; NOT_FOUND a model variable the checkpoint lacks
//         (named); FAILED_PRECONDITION a checkpoint tensor whose shape is not the model's
//         (both shapes named); INTERNAL HDF5, libzip or the file system failed.
absl::Status ExportKeras(const CheckpointReader& checkpoint, const std::string& out_path,
                         const KerasExportOptions& options = {});

// Writes a job's model with `weights` (one per model variable, in Model::variables()
// order: what Fit returns, or what the chief pulls from the ps) as a `.keras` file at
// `out_path`, atomically. The optimizer's state is not written.
// Errors: INVALID_ARGUMENT `out_path` does not end in ".keras", the model does not parse,
//         weights that do not fit the model (the variable and both shapes named); INTERNAL
//         HDF5, libzip or the file system failed.
absl::Status ExportKerasModel(const JobSpec& job, absl::Span<const Tensor> weights,
                              const std::string& out_path, const KerasExportOptions& options = {});

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_KERAS_EXPORT_H_
