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
// Written with Debian's libhdf5 into memory (the core driver without a backing store), or
// (WriteKerasWeightsH5File) into a file by blocks of rows, for weights larger than memory.
//
// Reading decodes the file in a short-lived child process (fork, no exec; why in the .cc):
// Debian's libhdf5 is not safe against corrupt files, and a crash, a hang or a memory
// blow-up there must become an error, not take the daemon down.
//
// Thread-safety: every function may be called from any thread (calls into the HDF5
// library, which is not built thread-safe, are serialized).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/checkpoint/zip_archive.h"
#include "common/tensor.h"

namespace pstrain {

// What WriteKerasWeightsH5File writes and ReadKerasWeightsH5 looks for: the object at `path` and its variables' shapes, in
// order.
struct KerasSaveableShapes {
  std::string path;
  std::vector<std::vector<int64_t>> shapes;
};

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


// Where WriteKerasWeightsH5File gets a variable's values: rows [row_begin, row_end) of
// variable `index` (counting every object's variables in order) into `out`, which has
// room for exactly those rows (a rank-0 variable is row [0, 1)). It is called with the
// HDF5 library's lock held, so it must not call the functions of this header.
using KerasRowsSource = std::function<absl::Status(size_t index, int64_t row_begin,
                                                   int64_t row_end, float* out)>;

// The file WriteKerasWeightsH5 makes, written to `path` (created or truncated) with the
// HDF5 file driver, dataset by dataset, a block of about 16 MiB of rows at a time
// (hyperslab writes): the caller holds a block, never a variable, and nothing holds the
// file (tools/export_keras of a table larger than memory).
// Errors: INVALID_ARGUMENT a repeated path, a path with an empty component, a shape that
//         is not a tensor shape; `rows`' own; INTERNAL the HDF5 library failed (its call
//         named).
absl::Status WriteKerasWeightsH5File(const std::string& path,
                                     absl::Span<const KerasSaveableShapes> objects,
                                     const KerasRowsSource& rows);

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

// The .keras archive's member that holds the weights.
inline constexpr char kKerasWeightsMember[] = "model.weights.h5";

// Rows [row_begin, row_end) of one variable in a model.weights.h5 (a rank-0 variable is
// one row: [0, 1)).
struct KerasRowsRequest {
  std::string name;     // what the caller holds the rows as (a ps's shard name), for errors
  std::string dataset;  // "layers/embedding/vars/0" (KerasWeightDatasets)
  std::vector<int64_t> shape;  // the whole variable's, as the file must hold it
  int64_t row_begin = 0;
  int64_t row_end = 0;
};

// A .keras file as one task names it to another: its path, and its model.weights.h5's
// size and CRC-32 as the archive's directory says (StatZipMember), so that a task that
// sees another file under that path does not read it.
struct KerasWeightsFile {
  std::string path;
  ZipMemberInfo member;
};

// Reads only `requests`' rows of the weights of the .keras file `file`. For a ps that reads its own rows of a model's initial
// weights: no task ever holds a whole variable.
//
// The member is extracted (in the reader child) into an unlinked temporary file in
// $TMPDIR (else /tmp), which the HDF5 file driver reads a hyperslab at a time (about
// 16 MiB of rows): the child holds one block, never a whole variable, and this process
// exactly the floats asked for. The file goes when the call returns.
//
// Checked before anything is opened, as a request from the network is: the path is
// absolute (the asking task's working directory is not this one's) and normalized (no
// empty, "." or ".." component: the path checked is the path read) and ends in ".keras";
// each dataset is "<object path>/vars/<index>" of [A-Za-z0-9_] components; each shape a
// tensor shape of at most 32 dimensions, each at least 1; each row range within it.
// Errors: INVALID_ARGUMENT any of those, or (from the file) a missing dataset, a shape
//         other than the request's, a dataset neither float nor integer, a corrupt file
//         (as ReadKerasWeightsH5); FAILED_PRECONDITION this task cannot open the path
//         or it is another file than `file.member` says (so the caller can send the rows
//         itself); INTERNAL no temporary file, the child cannot be started.
absl::StatusOr<std::vector<Tensor>> ReadKerasWeightRows(const KerasWeightsFile& file,
                                                        absl::Span<const KerasRowsRequest> requests);

// Keras's naming.to_snake_case of a class name, as the saving library names a container's
// objects: "Dense" -> "dense", "BatchNormalization" -> "batch_normalization", "Conv2D" ->
// "conv2d", "MaxPooling2D" -> "max_pooling2d".
std::string KerasSnakeCase(const std::string& class_name);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_KERAS_WEIGHTS_H5_H_
