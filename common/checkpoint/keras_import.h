#ifndef PSTRAIN_COMMON_CHECKPOINT_KERAS_IMPORT_H_
#define PSTRAIN_COMMON_CHECKPOINT_KERAS_IMPORT_H_

// Reads a Keras 3 `.keras` file (what `model.save("model.keras")` and tools/export_keras
// write; layout in common/checkpoint/keras_export.h): the model's architecture and
// weights, as `keras.saving.load_model` does, so that a job can continue training from it.
//
// Thread-safety: any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

struct KerasModelFile {
  nlohmann::json model;           // config.json without its compile_config
  nlohmann::json compile_config;  // null when the file has none
  // One tensor per model variable, in Model::variables() order (layer by layer, each
  // layer's in Keras's order), with the model's shapes.
  // Empty when read without them (ReadKerasFile's `read_weights`).
  std::vector<Tensor> weights;
};

class Model;

// Each of `model`'s layers' path in model.weights.h5, as Keras 3 names a Sequential
// model's layers: "layers/" + the class name in snake case, "_1", "_2", ... for repeats.
std::vector<std::string> KerasLayerPaths(const Model& model);

// Each of `model`'s variables' dataset in model.weights.h5, in Model::variables() order:
// "<its layer's path>/vars/<its index among the layer's variables>".
std::vector<std::string> KerasWeightDatasets(const Model& model);

// The largest member read from an archive (a 10M x 64 float table is 2.5 GB).
inline constexpr int64_t kMaxKerasMemberBytes = int64_t{16} << 30;

// Errors: NOT_FOUND no such file; INVALID_ARGUMENT (naming the file and what is wrong)
//         not a zip archive, no config.json or model.weights.h5, a config that is not
//         valid JSON or not a model pstrain builds (the layer and key named), weights that
//         do not match the model (the dataset and both shapes named);
//         RESOURCE_EXHAUSTED a member over kMaxKerasMemberBytes.
// Without `read_weights` only config.json is read (and the weights member must exist):
// a chief whose ps tasks read their own rows (ReadKerasWeightRows) never holds them.
absl::StatusOr<KerasModelFile> ReadKerasFile(const std::string& path, bool read_weights = true);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_KERAS_IMPORT_H_
