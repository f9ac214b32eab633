#include "common/model/layers/softmax_layer.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Layer>> SoftmaxLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<SoftmaxLayer> layer(new SoftmaxLayer());
  nlohmann::json axis = config.Raw("axis");
  if (axis.is_array() && axis.size() == 1) axis = axis[0];
  if (!axis.is_null()) {
    if (!axis.is_number_integer()) return config.Error("axis must be an integer");
    layer->axis_ = axis.get<int64_t>();
  }
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::StatusOr<Shape> SoftmaxLayer::BuildShapes(const Shape& input) {
  if (axis_ != -1 && axis_ != static_cast<int64_t>(input.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis_, " is unsupported (only the last axis)"));
  }
  return input;
}

nlohmann::json SoftmaxLayer::KerasConfig() const { return {{"axis", -1}}; }

}  // namespace pstrain
