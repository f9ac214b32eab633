#include "common/model/layers/global_average_pooling2d.h"

#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Layer>> GlobalAveragePooling2DLayer::FromConfig(
    LayerConfig& config) {
  std::unique_ptr<GlobalAveragePooling2DLayer> layer(new GlobalAveragePooling2DLayer());
  PS_RETURN_IF_ERROR(layer->ReadConfig(config));
  return std::unique_ptr<Layer>(std::move(layer));
}

}  // namespace pstrain
