#ifndef PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING1D_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING1D_H_

// Keras GlobalAveragePooling1D: [steps, channels] -> [channels], the mean over the other axes.

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/global_average_pooling.h"

namespace pstrain {

class GlobalAveragePooling1DLayer : public GlobalAveragePoolingLayer {
 public:
  // Keys: keepdims; data_format only channels_last.
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

 private:
  GlobalAveragePooling1DLayer() : GlobalAveragePoolingLayer("GlobalAveragePooling1D", 2) {}
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING1D_H_
