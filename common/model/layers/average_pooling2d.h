#ifndef PSTRAIN_COMMON_MODEL_LAYERS_AVERAGE_POOLING2D_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_AVERAGE_POOLING2D_H_

// Keras AveragePooling2D: the mean of each window over the input elements it covers
// (with "same" padding the padded positions are not counted, as in TensorFlow).

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/pooling2d.h"

namespace pstrain {

class AveragePooling2DLayer : public Pooling2DLayer {
 public:
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  absl::Status Prepare(Backend* backend, int64_t batch) override;
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

 private:
  AveragePooling2DLayer() : Pooling2DLayer("AveragePooling2D") {}
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_AVERAGE_POOLING2D_H_
