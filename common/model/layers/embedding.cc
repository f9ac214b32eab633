#include "common/model/layers/embedding.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

absl::StatusOr<std::unique_ptr<Layer>> EmbeddingLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<EmbeddingLayer> layer(new EmbeddingLayer());
  PS_ASSIGN_OR_RETURN(layer->input_dim_, config.PositiveInt("input_dim"));
  PS_ASSIGN_OR_RETURN(layer->output_dim_, config.PositiveInt("output_dim"));
  PS_ASSIGN_OR_RETURN(layer->initializer_,
                      config.InitializerValue("embeddings_initializer", "uniform"));
  PS_ASSIGN_OR_RETURN(int64_t input_length, config.Int("input_length", 0));
  if (input_length < 0) return config.Error("input_length must be positive");
  if (input_length > 0) layer->set_declared_input_shape({input_length});
  PS_RETURN_IF_ERROR(config.Unsupported("mask_zero", false));
  PS_RETURN_IF_ERROR(config.Unsupported("sparse", false));
  for (const char* key : {"embeddings_regularizer", "embeddings_constraint", "lora_rank",
                          "lora_alpha", "quantization_config"}) {
    PS_RETURN_IF_ERROR(config.Unsupported(key));
  }
  if (NumElements({layer->input_dim_, layer->output_dim_}) < 0) {
    return config.Error("input_dim x output_dim is too large");
  }
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::StatusOr<Shape> EmbeddingLayer::BuildShapes(const Shape& input) {
  DeclareVariable({"embeddings", {input_dim_, output_dim_}, initializer_});
  Shape out = input;
  out.push_back(output_dim_);
  return out;
}

absl::Status EmbeddingLayer::CheckInput(absl::Span<const float> ids) const {
  const float limit = static_cast<float>(input_dim_);
  for (size_t i = 0; i < ids.size(); ++i) {
    const float id = ids[i];
    if (!(id >= 0.0f && id < limit) || id != std::floor(id)) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", name(), "' (Embedding): id ", id,
                                                     " at input element ", i,
                                                     " is not an integer in [0, ", input_dim_,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

const float* EmbeddingLayer::Forward(const ForwardPass& p) {
  p.backend->GatherRows(p.batch * NumElements(input_shape()), output_dim_, p.input,
                        p.weights[0], p.output);
  return p.output;
}

float* EmbeddingLayer::Backward(const BackwardPass& p) {
  p.backend->ScatterAddRows(p.batch * NumElements(input_shape()), output_dim_, input_dim_,
                            p.input, p.dy, p.gradients[0]);
  return nullptr;
}

json EmbeddingLayer::KerasConfig() const {
  return {{"input_dim", input_dim_},
          {"output_dim", output_dim_},
          {"embeddings_initializer", initializer_.ToKeras()},
          {"embeddings_regularizer", nullptr},
          {"activity_regularizer", nullptr},
          {"embeddings_constraint", nullptr},
          {"mask_zero", false}};
}

}  // namespace pstrain
