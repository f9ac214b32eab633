#include "common/model/layers/activation_layer.h"

#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Layer>> ActivationLayer::FromConfig(LayerConfig& config) {
  if (!config.Has("activation")) return config.Error("has no activation");
  PS_ASSIGN_OR_RETURN(Activation activation, config.ActivationValue("activation"));
  return std::unique_ptr<Layer>(new ActivationLayer("Activation", activation));
}

const float* ActivationLayer::Forward(const ForwardPass& p) {
  if (p.skip_activation) return p.input;
  const int64_t cols = input_shape().back();
  p.backend->ActivationForward(activation_, RowsOf(input_shape(), p.batch), cols, p.input,
                               p.output);
  return p.output;
}

float* ActivationLayer::Backward(const BackwardPass& p) {
  if (p.skip_activation) return p.dy;
  if (p.dx == nullptr) return nullptr;
  const int64_t cols = input_shape().back();
  p.backend->ActivationBackward(activation_, RowsOf(input_shape(), p.batch), cols, p.output,
                                p.dy, p.dx);
  return p.dx;
}

nlohmann::json ActivationLayer::KerasConfig() const {
  return {{"activation", ActivationName(activation_)}};
}

}  // namespace pstrain
