#include "common/model/layers/flatten.h"

#include "common/status_macros.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Layer>> FlattenLayer::FromConfig(LayerConfig& config) {
  PS_RETURN_IF_ERROR(config.ChannelsLast());
  return std::unique_ptr<Layer>(new FlattenLayer());
}

absl::StatusOr<Shape> FlattenLayer::BuildShapes(const Shape& input) {
  return Shape{NumElements(input)};
}

nlohmann::json FlattenLayer::KerasConfig() const {
  return {{"data_format", "channels_last"}};
}

}  // namespace pstrain
