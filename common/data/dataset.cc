#include "common/data/dataset.h"

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Copies rows `rows` of a [N, width] (or [N]) tensor into a new [rows.size(), width] one.
Tensor GatherRows(const Tensor& t, const std::vector<int64_t>& rows) {
  std::vector<int64_t> shape = t.shape();
  const int64_t width = shape.size() > 1 ? shape[1] : 1;
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out(shape);
  float* dst = out.data();
  for (int64_t row : rows) {
    std::memcpy(dst, t.data() + row * width, sizeof(float) * width);
    dst += width;
  }
  return out;
}

}  // namespace

int64_t Dataset::num_examples() const { return x.shape().empty() ? 0 : x.shape()[0]; }

int64_t Dataset::num_features() const { return x.shape().size() < 2 ? 0 : x.shape()[1]; }

int64_t Dataset::label_width() const { return y.shape().size() == 2 ? y.shape()[1] : 1; }

absl::Status Dataset::Validate() const {
  if (x.shape().size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset features must be [N, F], got ", x.ShapeString()));
  }
  if (NumElements(x.shape()) != x.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset features hold ", x.num_elements(),
                                                   " values for shape ", x.ShapeString()));
  }
  if (y.shape().empty() || y.shape().size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset labels must be [N] or [N, K], got ", y.ShapeString()));
  }
  if (NumElements(y.shape()) != y.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset labels hold ", y.num_elements(),
                                                   " values for shape ", y.ShapeString()));
  }
  if (y.shape()[0] != x.shape()[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset has ", x.shape()[0], " feature rows but ", y.shape()[0], " labels"));
  }
  if (num_classes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset num_classes is negative (", num_classes, ")"));
  }
  if (num_classes > 0 && sparse_labels()) {
    const float* labels = y.data();
    for (int64_t i = 0; i < y.num_elements(); ++i) {
      const float v = labels[i];
      if (!(v >= 0.0f && v < static_cast<float>(num_classes)) || std::floor(v) != v) {
        return absl::InvalidArgumentError(absl::StrCat("dataset label ", v, " of example ", i,
                                                       " is not a class id in [0, ", num_classes,
                                                       ")"));
      }
    }
  }
  if (num_classes > 0 && !sparse_labels() && y.shape()[1] != num_classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset labels are ", y.ShapeString(), " but num_classes is ", num_classes));
  }
  return absl::OkStatus();
}

absl::Status Dataset::CheckClassIds(int64_t classes) const {
  if (!sparse_labels()) {
    if (label_width() == classes) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("labels are ", y.ShapeString(), " but the model has ", classes, " outputs"));
  }
  const float* labels = y.data();
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    const float v = labels[i];
    if (!(v >= 0.0f && v < static_cast<float>(classes)) || std::floor(v) != v) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label ", v, " of example ", i, " (row ", i + 1,
          " in file order) is not a class id in [0, ", classes, ") for the model's ", classes,
          " outputs"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Dataset> Dataset::Shard(int64_t num_shards, int64_t index) const {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shard count must be >= 1, got ", num_shards));
  }
  if (index < 0 || index >= num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard index ", index, " is not in [0, ", num_shards, ")"));
  }
  std::vector<int64_t> rows;
  rows.reserve(num_examples() / num_shards + 1);
  for (int64_t i = index; i < num_examples(); i += num_shards) rows.push_back(i);
  return Dataset{GatherRows(x, rows), GatherRows(y, rows), num_classes};
}

absl::StatusOr<Dataset> Dataset::Slice(int64_t start, int64_t count) const {
  if (start < 0 || count < 0 || start > num_examples() || count > num_examples() - start) {
    return absl::InvalidArgumentError(absl::StrCat("slice [", start, ", ", start + count,
                                                   ") is not inside the dataset's ", num_examples(),
                                                   " examples"));
  }
  std::vector<int64_t> rows(count);
  for (int64_t i = 0; i < count; ++i) rows[i] = start + i;
  return Dataset{GatherRows(x, rows), GatherRows(y, rows), num_classes};
}

void Dataset::ScaleFeatures(float factor) {
  for (float& v : x.values()) v *= factor;
}

absl::StatusOr<Dataset> MakeDataset(Tensor x, Tensor y, int64_t num_classes) {
  Dataset data{std::move(x), std::move(y), num_classes};
  PS_RETURN_IF_ERROR(data.Validate());
  return data;
}

absl::StatusOr<Dataset> Dataset::OneHot() const {
  if (!sparse_labels()) return *this;
  if (num_classes <= 0) {
    return absl::InvalidArgumentError(
        "one-hot labels need a known class count (set \"classes\" in the data source)");
  }
  const int64_t n = num_examples();
  const int64_t k = num_classes;
  Tensor hot({n, k});
  for (int64_t i = 0; i < n; ++i) {
    hot.data()[i * k + static_cast<int64_t>(y.data()[i])] = 1.0f;
  }
  return MakeDataset(x, std::move(hot), k);
}

}  // namespace pstrain
