#include "common/model/layers/dense.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

absl::StatusOr<std::unique_ptr<Layer>> DenseLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<DenseLayer> layer(new DenseLayer());
  PS_ASSIGN_OR_RETURN(layer->units_, config.PositiveInt("units"));
  PS_ASSIGN_OR_RETURN(layer->activation_, config.ActivationValue("activation"));
  PS_ASSIGN_OR_RETURN(layer->use_bias_, config.Bool("use_bias", true));
  PS_ASSIGN_OR_RETURN(layer->kernel_initializer_,
                      config.InitializerValue("kernel_initializer", "glorot_uniform"));
  PS_ASSIGN_OR_RETURN(layer->bias_initializer_,
                      config.InitializerValue("bias_initializer", "zeros"));
  for (const char* key : {"kernel_regularizer", "bias_regularizer", "kernel_constraint",
                          "bias_constraint", "lora_rank", "lora_alpha", "quantization_config"}) {
    PS_RETURN_IF_ERROR(config.Unsupported(key));
  }
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::StatusOr<Shape> DenseLayer::BuildShapes(const Shape& input) {
  in_ = input.back();
  DeclareVariable({"kernel", {in_, units_}, kernel_initializer_});
  if (use_bias_) DeclareVariable({"bias", {units_}, bias_initializer_});
  Shape out = input;
  out.back() = units_;
  return out;
}

const float* DenseLayer::Forward(const ForwardPass& p) {
  const int64_t rows = RowsOf(input_shape(), p.batch);
  p.backend->Gemm(false, false, rows, units_, in_, 1.0f, p.input, p.weights[0], 0.0f, p.output);
  if (use_bias_) p.backend->AddBias(rows, units_, p.weights[1], p.output);
  if (!p.skip_activation && activation_ != Activation::kLinear) {
    p.backend->ActivationForward(activation_, rows, units_, p.output, p.output);
  }
  return p.output;
}

float* DenseLayer::Backward(const BackwardPass& p) {
  const int64_t rows = RowsOf(input_shape(), p.batch);
  if (!p.skip_activation && activation_ != Activation::kLinear) {
    p.backend->ActivationBackward(activation_, rows, units_, p.output, p.dy, p.dy);
  }
  p.backend->Gemm(true, false, in_, units_, rows, 1.0f, p.input, p.dy, 0.0f, p.gradients[0]);
  if (use_bias_) p.backend->ColumnSums(rows, units_, p.dy, p.gradients[1]);
  if (p.dx == nullptr) return nullptr;
  p.backend->Gemm(false, true, rows, in_, units_, 1.0f, p.dy, p.weights[0], 0.0f, p.dx);
  return p.dx;
}

json DenseLayer::KerasConfig() const {
  return {{"units", units_},
          {"activation", ActivationName(activation_)},
          {"use_bias", use_bias_},
          {"kernel_initializer", kernel_initializer_.ToKeras()},
          {"bias_initializer", bias_initializer_.ToKeras()},
          {"kernel_regularizer", nullptr},
          {"bias_regularizer", nullptr},
          {"kernel_constraint", nullptr},
          {"bias_constraint", nullptr}};
}

}  // namespace pstrain
