#ifndef PSTRAIN_COMMON_MODEL_LAYERS_MAX_POOLING2D_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_MAX_POOLING2D_H_

// Keras MaxPooling2D: the maximum of each window (padding never wins); the gradient goes
// to the first maximal element of each window, as TensorFlow's MaxPoolGrad does.

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/pooling2d.h"

namespace pstrain {

class MaxPooling2DLayer : public Pooling2DLayer {
 public:
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  absl::Status Prepare(Backend* backend, int64_t batch) override;
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

 private:
  MaxPooling2DLayer() : Pooling2DLayer("MaxPooling2D") {}

  DeviceBuffer argmax_;  // per output element: its window's maximal position
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_MAX_POOLING2D_H_
