#ifndef PSTRAIN_COMMON_DATA_DATASET_H_
#define PSTRAIN_COMMON_DATA_DATASET_H_

// A whole dataset in host memory: float features and float labels, the form every reader
// (synthetic, IDX, CSV, NPY) produces and the Batcher consumes.
//
// Value type; not thread-safe for mutation. Const access from many threads is safe.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"

namespace pstrain {

struct Dataset {
  // [N, F] features, row-major: example i is x.data() + i * F.
  Tensor x;
  // [N] class ids stored as floats (sparse labels), or [N, K] (one-hot / multi-target).
  Tensor y;
  // Number of classes for classification; 0 when unknown or not a classification task.
  int64_t num_classes = 0;

  int64_t num_examples() const;
  int64_t num_features() const;
  // True for [N] class ids.
  bool sparse_labels() const { return y.shape().size() == 1; }
  // 1 for sparse labels, K for [N, K].
  int64_t label_width() const;

  // OK when x is [N, F] and y is [N] or [N, K] with element counts matching the shapes;
  // for sparse labels with num_classes > 0 every label is an integer in [0, num_classes);
  // for [N, K] labels with num_classes > 0, K == num_classes; num_classes >= 0.
  // Errors: InvalidArgument naming the first problem (and the example for a bad label).
  absl::Status Validate() const;

  // OK when every label is a class id below `classes` (a model's output count): for
  // sparse labels an integer in [0, classes); [N, K] labels need K == classes.
  // Errors: InvalidArgument naming the first bad label and its example, counted in the
  // order the data was read (file order), before any shuffling.
  absl::Status CheckClassIds(int64_t classes) const;

  // The examples index, index + num_shards, index + 2 * num_shards, ... (TF's
  // Dataset.shard semantics, so each worker reads a disjoint part). Copies those rows.
  // Errors: InvalidArgument when num_shards < 1 or index is not in [0, num_shards).
  absl::StatusOr<Dataset> Shard(int64_t num_shards, int64_t index) const;

  // Rows [start, start + count) (a train/validation split). Copies those rows.
  // Errors: InvalidArgument when the range is not inside [0, N].
  absl::StatusOr<Dataset> Slice(int64_t start, int64_t count) const;

  // x *= factor, in place (e.g. 1/255 for pixel values).
  void ScaleFeatures(float factor);

  // The same examples with class-id labels as one-hot rows [N, num_classes] (Keras's
  // to_categorical); a dataset whose labels are already rows is returned as it is.
  // Errors: INVALID_ARGUMENT when the class count is unknown.
  absl::StatusOr<Dataset> OneHot() const;
};

// Builds and validates a Dataset (see Dataset::Validate).
absl::StatusOr<Dataset> MakeDataset(Tensor x, Tensor y, int64_t num_classes);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_DATASET_H_
