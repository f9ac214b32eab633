#ifndef PSTRAIN_COMMON_MODEL_LAYERS_ACTIVATION_LAYER_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_ACTIVATION_LAYER_H_

// Keras Activation: an elementwise activation (softmax over the last axis).

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class ActivationLayer : public Layer {
 public:
  // Keys: activation (required).
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  Activation output_activation() const override { return activation_; }
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

 protected:
  ActivationLayer(std::string class_name, Activation activation)
      : Layer(std::move(class_name)), activation_(activation) {}
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override { return input; }
  nlohmann::json KerasConfig() const override;

 private:
  Activation activation_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_ACTIVATION_LAYER_H_
