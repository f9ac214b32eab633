#include "common/model/layers/global_average_pooling1d.h"

#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Layer>> GlobalAveragePooling1DLayer::FromConfig(
    LayerConfig& config) {
  std::unique_ptr<GlobalAveragePooling1DLayer> layer(new GlobalAveragePooling1DLayer());
  PS_RETURN_IF_ERROR(layer->ReadConfig(config));
  return std::unique_ptr<Layer>(std::move(layer));
}

}  // namespace pstrain
