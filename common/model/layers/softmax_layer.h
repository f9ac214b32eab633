#ifndef PSTRAIN_COMMON_MODEL_LAYERS_SOFTMAX_LAYER_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_SOFTMAX_LAYER_H_

// Keras Softmax: softmax over the last axis (a cross-entropy loss folds it in, as it does
// a softmax activation).

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/activation_layer.h"

namespace pstrain {

class SoftmaxLayer : public ActivationLayer {
 public:
  // Keys: axis (only the last axis: -1, [-1], or its index counting the batch as 0).
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

 private:
  SoftmaxLayer() : ActivationLayer("Softmax", Activation::kSoftmax) {}

  int64_t axis_ = -1;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_SOFTMAX_LAYER_H_
