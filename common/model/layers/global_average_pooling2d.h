#ifndef PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING2D_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING2D_H_

// Keras GlobalAveragePooling2D: [height, width, channels] -> [channels], the mean over
// the other axes.

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/global_average_pooling.h"

namespace pstrain {

class GlobalAveragePooling2DLayer : public GlobalAveragePoolingLayer {
 public:
  // Keys: keepdims; data_format only channels_last.
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

 private:
  GlobalAveragePooling2DLayer() : GlobalAveragePoolingLayer("GlobalAveragePooling2D", 3) {}
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING2D_H_
