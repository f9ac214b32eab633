#include "common/model/layers/reshape.h"

#include "absl/strings/str_cat.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

absl::StatusOr<std::unique_ptr<Layer>> ReshapeLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<ReshapeLayer> layer(new ReshapeLayer());
  const json& target = config.Raw("target_shape");
  if (!target.is_array() || target.empty()) {
    return config.Error(absl::StrCat("target_shape must be a non-empty list, got ",
                                     target.dump()));
  }
  int inferred = 0;
  for (const json& d : target) {
    if (!d.is_number_integer() || (d.get<int64_t>() <= 0 && d.get<int64_t>() != -1)) {
      return config.Error(absl::StrCat("target_shape ", target.dump(),
                                       " must hold positive integers and at most one -1"));
    }
    if (d.get<int64_t>() == -1) ++inferred;
    layer->target_.push_back(d.get<int64_t>());
  }
  if (inferred > 1) return config.Error("target_shape may hold only one -1");
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::StatusOr<Shape> ReshapeLayer::BuildShapes(const Shape& input) {
  const int64_t total = NumElements(input);
  int64_t known = 1;
  for (int64_t d : target_) {
    if (d > 0) known *= d;
  }
  Shape out = target_;
  for (int64_t& d : out) {
    if (d == -1) d = known > 0 && total % known == 0 ? total / known : -1;
  }
  if (NumElements(out) != total) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", ShapeToString(input),
                                                   " (", total, " elements) into ",
                                                   ShapeToString(target_)));
  }
  return out;
}

json ReshapeLayer::KerasConfig() const { return {{"target_shape", target_}}; }

}  // namespace pstrain
