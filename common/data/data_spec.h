#ifndef PSTRAIN_COMMON_DATA_DATA_SPEC_H_
#define PSTRAIN_COMMON_DATA_DATA_SPEC_H_

// The "data" part of a job spec: which dataset to load, as JSON. One of
//
//   {"type": "synthetic", "samples": 1000, "features": 784, "classes": 10, "seed": 1}
//       every field optional (defaults as shown, seed 0).
//   {"type": "zipf_ids", "samples": 10000, "ids_per_example": 8, "vocabulary": 1000000,
//    "classes": 10, "exponent": 1.1, "noise": 0.3, "seed": 0, "stream": 0}
//       every field optional (defaults as shown); ids for an Embedding, Zipf-distributed,
//       with a label they carry: see zipf_ids.h for the generator.
//   {"type": "idx", "images": "train-images-idx3-ubyte.gz",
//    "labels": "train-labels-idx1-ubyte.gz", "scale": 0.00392156862745098}
//       scale optional (default 1); relative paths are relative to base_dir.
//   {"type": "fashion_mnist", "split": "train" | "test", "scale": 0.00392156862745098,
//    "dir": "/usr/share/datasets/fashion-mnist"}
//       split required; scale optional (default 1/255); dir optional (the Debian
//       package dataset-fashion-mnist's folder).
//   {"type": "csv", "path": "data.csv", "label_column": -1, "header": true,
//    "classes": 0, "scale": 1}
//       see csv_reader.h; label_column -1 = last; classes 0 = max label + 1.
//   {"type": "npy", "x": "x.npy", "y": "y.npy", "scale": 1, "classes": 0}
//       see npy_reader.h.
//
// Unknown keys are rejected so a misspelt field is not silently ignored.

#include <string>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Loads the dataset `source` describes. Thread-compatible.
// Errors: InvalidArgument for an unknown type, a missing, misspelt or mistyped field, or
// bad data (naming the file); NotFound for a missing file (for fashion_mnist, saying to
// install the Debian package dataset-fashion-mnist).
absl::StatusOr<Dataset> LoadDataset(const nlohmann::json& source, const std::string& base_dir);

// LoadDataset for one of a job's sources: errors start with `what` ("data.train"), and
// labels become one-hot rows when `one_hot` (see Dataset::OneHot).
absl::StatusOr<Dataset> LoadJobDataset(const nlohmann::json& source, const std::string& base_dir,
                                       const std::string& what, bool one_hot);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_DATA_SPEC_H_
