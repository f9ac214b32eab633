#include "common/model/layers/average_pooling2d.h"

#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Layer>> AveragePooling2DLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<AveragePooling2DLayer> layer(new AveragePooling2DLayer());
  PS_RETURN_IF_ERROR(layer->ReadConfig(config));
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::Status AveragePooling2DLayer::Prepare(Backend* backend, int64_t batch) {
  window_.batch = batch;
  return absl::OkStatus();
}

const float* AveragePooling2DLayer::Forward(const ForwardPass& p) {
  p.backend->AvgPoolForward(window_, p.input, p.output);
  return p.output;
}

float* AveragePooling2DLayer::Backward(const BackwardPass& p) {
  if (p.dx == nullptr) return nullptr;
  p.backend->AvgPoolBackward(window_, p.dy, p.dx);
  return p.dx;
}

}  // namespace pstrain
