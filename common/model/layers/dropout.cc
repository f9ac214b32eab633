#include "common/model/layers/dropout.h"

#include "common/status_macros.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

absl::StatusOr<std::unique_ptr<Layer>> DropoutLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<DropoutLayer> layer(new DropoutLayer());
  PS_ASSIGN_OR_RETURN(double rate, config.Number("rate", -1.0));
  if (!(rate >= 0.0 && rate < 1.0)) return config.Error("rate must be in [0, 1)");
  layer->rate_ = rate;
  layer->seed_ = config.Raw("seed");
  if (!layer->seed_.is_null() && !layer->seed_.is_number_integer()) {
    return config.Error("seed must be an integer or null");
  }
  PS_RETURN_IF_ERROR(config.Unsupported("noise_shape"));
  // Keras 2's random-generator kind: masks here come from the step seed whatever it says.
  config.Raw("rng_type");
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::Status DropoutLayer::Prepare(Backend* backend, int64_t batch) {
  mask_.Reset();
  if (rate_ > 0.0) {
    PS_ASSIGN_OR_RETURN(mask_, backend->Allocate(batch * NumElements(input_shape())));
  }
  return absl::OkStatus();
}

const float* DropoutLayer::Forward(const ForwardPass& p) {
  mask_valid_ = p.training && rate_ > 0.0;
  if (!mask_valid_) return p.input;
  p.backend->DropoutForward(p.batch * NumElements(input_shape()), static_cast<float>(rate_), p.seed, p.input,
                            mask_.data(), p.output);
  return p.output;
}

float* DropoutLayer::Backward(const BackwardPass& p) {
  if (!mask_valid_) return p.dy;
  if (p.dx == nullptr) return nullptr;
  p.backend->Multiply(p.batch * NumElements(input_shape()), p.dy, mask_.data(), p.dx);
  return p.dx;
}

json DropoutLayer::KerasConfig() const {
  return {{"rate", rate_}, {"seed", seed_}, {"noise_shape", nullptr}};
}

}  // namespace pstrain
