#ifndef PSTRAIN_COMMON_MODEL_LAYERS_FLATTEN_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_FLATTEN_H_

// Keras Flatten: [batch, d1, d2, ...] -> [batch, d1*d2*...]; a view (no copy).

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class FlattenLayer : public Layer {
 public:
  // Keys: data_format (only channels_last).
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  bool IsView() const override { return true; }
  const float* Forward(const ForwardPass& pass) override { return pass.input; }
  float* Backward(const BackwardPass& pass) override { return pass.dy; }

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

 private:
  FlattenLayer() : Layer("Flatten") {}
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_FLATTEN_H_
