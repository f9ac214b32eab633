#ifndef PSTRAIN_COMMON_MODEL_LAYERS_RESHAPE_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_RESHAPE_H_

// Keras Reshape: the same elements in another shape (one dimension may be -1, inferred);
// a view (no copy).

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class ReshapeLayer : public Layer {
 public:
  // Keys: target_shape (required; positive integers, at most one -1).
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  bool IsView() const override { return true; }
  const float* Forward(const ForwardPass& pass) override { return pass.input; }
  float* Backward(const BackwardPass& pass) override { return pass.dy; }

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

 private:
  ReshapeLayer() : Layer("Reshape") {}

  Shape target_;  // as configured, -1 kept
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_RESHAPE_H_
