#include "common/model/layers/max_pooling2d.h"

#include "common/status_macros.h"
#include "common/tensor.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Layer>> MaxPooling2DLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<MaxPooling2DLayer> layer(new MaxPooling2DLayer());
  PS_RETURN_IF_ERROR(layer->ReadConfig(config));
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::Status MaxPooling2DLayer::Prepare(Backend* backend, int64_t batch) {
  window_.batch = batch;
  argmax_.Reset();
  PS_ASSIGN_OR_RETURN(argmax_, backend->Allocate(batch * NumElements(output_shape())));
  return absl::OkStatus();
}

const float* MaxPooling2DLayer::Forward(const ForwardPass& p) {
  p.backend->MaxPoolForward(window_, p.input, p.output, argmax_.data());
  return p.output;
}

float* MaxPooling2DLayer::Backward(const BackwardPass& p) {
  if (p.dx == nullptr) return nullptr;
  p.backend->MaxPoolBackward(window_, p.dy, argmax_.data(), p.dx);
  return p.dx;
}

}  // namespace pstrain
