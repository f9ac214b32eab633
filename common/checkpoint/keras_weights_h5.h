#ifndef PSTRAIN_COMMON_CHECKPOINT_KERAS_WEIGHTS_H5_H_
#define PSTRAIN_COMMON_CHECKPOINT_KERAS_WEIGHTS_H5_H_

// The weights file of a Keras 3 `.keras` archive (`model.weights.h5`), as Keras 3's saving
// library (keras/src/saving/saving_lib.py, H5IOStore) lays it out: each saveable object
// (the model, each of its layers, the optimizer) has a group at its path holding a "vars"
// group, whose datasets "0", "1", ... are its variables in the order the object declares
// them. The model itself is the root ("/vars"); a Sequential model's layers are at
// "layers/<snake_case class name>" with "_1", "_2", ... for repeats ("layers/dense",
// "layers/dense_1", "layers/dropout"), not at their names. A layer without variables still
// has its (empty) "vars" group.
//
// Written with Debian's libhdf5 into memory (the core driver without a backing store), so
// the bytes can go into the zip archive with no temporary file.
//
// Reading decodes the file in a short-lived child process (fork, no exec; why in the .cc):
// Debian's libhdf5 is not safe against corrupt files, and a crash, a hang or a memory
// blow-up there must become an error, not take the daemon down.
//
// Thread-safety: both functions may be called from any thread (calls into the HDF5
// library, which is not built thread-safe, are serialized).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"

namespace pstrain {

// One saveable object's variables at `path` ("" for the model itself, "layers/dense").
struct KerasSaveableWeights {
  std::string path;
  std::vector<const Tensor*> variables;  // Not owned; declaration order.
};

// The HDF5 file image: the root "vars" group (always; it holds the variables of the
// object at path "", if any), then every other object's group in `objects` order;
// float32 little-endian datasets shaped as the tensors.
// Errors: INVALID_ARGUMENT a repeated path, a path with an empty component, a null
//         tensor or one whose values do not fill its shape; INTERNAL the HDF5 library
//         failed (its call named).
absl::StatusOr<std::string> WriteKerasWeightsH5(absl::Span<const KerasSaveableWeights> objects);

// What ReadKerasWeightsH5 looks for: the object at `path` and its variables' shapes, in
// order.
struct KerasSaveableShapes {
  std::string path;
  std::vector<std::vector<int64_t>> shapes;
};

// Reads, for every object, the datasets "0", "1", ... of "<path>/vars" from the HDF5 file
// image `image` (as WriteKerasWeightsH5 or Keras writes it), converted to float32.
// The file is decoded in a child process (the header's first paragraph); the values come
// back through a pipe, exactly as many as `objects`' shapes ask for.
// Errors: INVALID_ARGUMENT `image` is not an HDF5 file, or (naming the dataset) a missing
//         group or dataset, a dataset more than the object declares, a shape other than
//         the one wanted (both named), a dataset that is not floating point or integer;
//         a file the HDF5 library crashes on (the signal named) or takes over a minute
//         to read (a corrupt file; the child is killed); a shape in `objects` that is not
//         a tensor shape. INTERNAL the child process cannot be started, or its answer
//         is malformed.
absl::StatusOr<std::vector<std::vector<Tensor>>> ReadKerasWeightsH5(
    const std::string& image, absl::Span<const KerasSaveableShapes> objects);

// Keras's naming.to_snake_case of a class name, as the saving library names a container's
// objects: "Dense" -> "dense", "BatchNormalization" -> "batch_normalization", "Conv2D" ->
// "conv2d", "MaxPooling2D" -> "max_pooling2d".
std::string KerasSnakeCase(const std::string& class_name);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_KERAS_WEIGHTS_H5_H_
