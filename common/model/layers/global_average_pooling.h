#ifndef PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING_H_

// What GlobalAveragePooling1D ([steps, c]) and GlobalAveragePooling2D ([h, w, c]) share:
// the mean over every axis but the channels, [c] (or [1, c] / [1, 1, c] with keepdims).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class GlobalAveragePoolingLayer : public Layer {
 public:
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

 protected:
  // `rank`: the input rank without the batch (2 for 1D, 3 for 2D).
  GlobalAveragePoolingLayer(std::string class_name, size_t rank)
      : Layer(std::move(class_name)), rank_(rank) {}

  // Keys: keepdims; data_format only channels_last.
  absl::Status ReadConfig(LayerConfig& config);

  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

 private:
  const size_t rank_;
  bool keepdims_ = false;
  int64_t positions_ = 0;  // elements averaged per channel
  int64_t channels_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_GLOBAL_AVERAGE_POOLING_H_
