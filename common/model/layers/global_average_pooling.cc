#include "common/model/layers/global_average_pooling.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::Status GlobalAveragePoolingLayer::ReadConfig(LayerConfig& config) {
  PS_RETURN_IF_ERROR(config.ChannelsLast());
  PS_ASSIGN_OR_RETURN(keepdims_, config.Bool("keepdims", false));
  return absl::OkStatus();
}

absl::StatusOr<Shape> GlobalAveragePoolingLayer::BuildShapes(const Shape& input) {
  if (input.size() != rank_) {
    return absl::InvalidArgumentError(absl::StrCat("needs an input of rank ", rank_,
                                                   " (channels last), got ",
                                                   ShapeToString(input)));
  }
  channels_ = input.back();
  positions_ = NumElements(input) / channels_;
  if (!keepdims_) return Shape{channels_};
  Shape out(rank_, 1);
  out.back() = channels_;
  return out;
}

const float* GlobalAveragePoolingLayer::Forward(const ForwardPass& p) {
  p.backend->MeanOverPositions(p.batch, positions_, channels_, p.input, p.output);
  return p.output;
}

float* GlobalAveragePoolingLayer::Backward(const BackwardPass& p) {
  if (p.dx == nullptr) return nullptr;
  p.backend->MeanOverPositionsBackward(p.batch, positions_, channels_, p.dy, p.dx);
  return p.dx;
}

nlohmann::json GlobalAveragePoolingLayer::KerasConfig() const {
  return {{"data_format", "channels_last"}, {"keepdims", keepdims_}};
}

}  // namespace pstrain
