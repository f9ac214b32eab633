#include "common/model/layers/pooling2d.h"

#include "common/model/layers/window.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::Status Pooling2DLayer::ReadConfig(LayerConfig& config) {
  PS_ASSIGN_OR_RETURN(pool_size_, config.IntTuple("pool_size", 2, 1, std::vector<int64_t>{2, 2}));
  PS_ASSIGN_OR_RETURN(strides_, config.IntTuple("strides", 2, 1, pool_size_));
  PS_ASSIGN_OR_RETURN(padding_, config.Padding("padding"));
  return config.ChannelsLast();
}

absl::StatusOr<Shape> Pooling2DLayer::BuildShapes(const Shape& input) {
  PS_ASSIGN_OR_RETURN(window_, PlanWindow2D(input, pool_size_, strides_, padding_));
  return Shape{window_.out_h, window_.out_w, window_.channels};
}

nlohmann::json Pooling2DLayer::KerasConfig() const {
  return {{"pool_size", pool_size_},
          {"padding", padding_},
          {"strides", strides_},
          {"data_format", "channels_last"}};
}

}  // namespace pstrain
