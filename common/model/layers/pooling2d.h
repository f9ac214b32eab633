#ifndef PSTRAIN_COMMON_MODEL_LAYERS_POOLING2D_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_POOLING2D_H_

// What Keras's 2-D pooling layers share (MaxPooling2D, AveragePooling2D): the config
// (pool_size, strides, padding, channels_last) and the window over [h, w, c].

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class Pooling2DLayer : public Layer {
 protected:
  explicit Pooling2DLayer(std::string class_name) : Layer(std::move(class_name)) {}

  // Keys: pool_size (default 2), strides (default: pool_size), padding (valid | same);
  // data_format only channels_last.
  absl::Status ReadConfig(LayerConfig& config);

  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

  Window2D window_;

 private:
  std::vector<int64_t> pool_size_;
  std::vector<int64_t> strides_;
  std::string padding_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_POOLING2D_H_
