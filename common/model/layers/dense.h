#ifndef PSTRAIN_COMMON_MODEL_LAYERS_DENSE_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_DENSE_H_

// Keras Dense: y = activation(x . kernel + bias) on the last axis (kernel [in, units],
// bias [units]); leading axes are rows, as Keras applies Dense to rank > 2 inputs.

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class DenseLayer : public Layer {
 public:
  // Keys: units, activation, use_bias, kernel_initializer, bias_initializer; the
  // regularizers, constraints, lora_rank/lora_alpha and quantization_config only unset.
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  Activation output_activation() const override { return activation_; }
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

 private:
  DenseLayer() : Layer("Dense") {}

  int64_t units_ = 0;
  int64_t in_ = 0;
  Activation activation_ = Activation::kLinear;
  bool use_bias_ = true;
  Initializer kernel_initializer_;
  Initializer bias_initializer_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_DENSE_H_
