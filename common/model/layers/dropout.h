#ifndef PSTRAIN_COMMON_MODEL_LAYERS_DROPOUT_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_DROPOUT_H_

// Keras Dropout: in training, zeroes each element with probability `rate` and scales the
// rest by 1/(1-rate) (inverted dropout); at inference the identity. Masks are drawn from
// the step's seed (ForwardPass::seed), not from the config's `seed`, so every replica and
// backend draws the same mask for the same step.

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"
#include "nlohmann/json.hpp"  // a json member (layer.h has only json_fwd.hpp)

namespace pstrain {

class DropoutLayer : public Layer {
 public:
  // Keys: rate (required, in [0, 1)), seed (accepted, see above); noise_shape only null.
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  absl::Status Prepare(Backend* backend, int64_t batch) override;
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override { return input; }
  nlohmann::json KerasConfig() const override;

 private:
  DropoutLayer() : Layer("Dropout") {}

  double rate_ = 0.0;  // as configured (the kernel takes a float)
  nlohmann::json seed_;  // as configured, written back unchanged
  DeviceBuffer mask_;
  bool mask_valid_ = false;  // the last Forward drew a mask (training with rate > 0)
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_DROPOUT_H_
