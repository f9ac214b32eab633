#ifndef PSTRAIN_COMMON_MODEL_LAYERS_EMBEDDING_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_EMBEDDING_H_

// Keras Embedding: integer ids (carried as floats, the model's input) -> rows of the
// table `embeddings` [input_dim, output_dim]; [batch, ...] -> [batch, ..., output_dim].
// It must be the first layer (no gradient flows into ids). Its gradient is dense here
// (zero except the rows the batch used, duplicates summed).

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class EmbeddingLayer : public Layer {
 public:
  // Keys: input_dim, output_dim (required), embeddings_initializer (default "uniform"),
  // input_length (Keras 2: declares the input [input_length]); mask_zero and sparse only
  // false; regularizers, constraint, lora and quantization only unset.
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  bool HasInputGradient() const override { return false; }
  // Every id must be an integer in [0, input_dim).
  absl::Status CheckInput(absl::Span<const float> ids) const override;
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

  int64_t input_dim() const { return input_dim_; }
  int64_t output_dim() const { return output_dim_; }

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

 private:
  EmbeddingLayer() : Layer("Embedding") {}

  int64_t input_dim_ = 0;
  int64_t output_dim_ = 0;
  Initializer initializer_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_EMBEDDING_H_
