#ifndef PSTRAIN_COMMON_MODEL_LAYERS_INPUT_LAYER_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_INPUT_LAYER_H_

// Keras InputLayer: declares the model's input shape; it never runs.

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class InputLayer : public Layer {
 public:
  // Keys (Keras 2 and 3): batch_shape, batch_input_shape, shape, input_shape, batch_size,
  // dtype (only float32), name; sparse, ragged, optional only false; input_tensor and
  // type_spec only null.
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  bool IsInput() const override { return true; }
  bool IsView() const override { return true; }
  const float* Forward(const ForwardPass& pass) override { return pass.input; }
  float* Backward(const BackwardPass& pass) override { return pass.dy; }

  // InputLayer's own Keras 3 entry (no build_config, no trainable).
  static nlohmann::json KerasEntry(const std::string& name, const Shape& shape);

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override { return input; }
  nlohmann::json KerasConfig() const override;

 private:
  InputLayer() : Layer("InputLayer") {}
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_INPUT_LAYER_H_
