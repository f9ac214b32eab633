#ifndef PSTRAIN_COMMON_MODEL_LAYERS_BATCH_NORMALIZATION_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_BATCH_NORMALIZATION_H_

// Keras BatchNormalization over the last axis (channels_last): each channel normalized
// over every other axis of the batch.
//
// Training (TrainStep): y = gamma * (x - mean_B) / sqrt(var_B + epsilon) + beta with the
// batch's mean and (biased) variance, and the backward pass goes through those
// statistics. The moving statistics are non-trainable variables: TrainStep's "gradient"
// for moving_mean (moving_variance) is the batch mean (variance), which the variable's
// update rule folds in as moving = momentum * moving + (1 - momentum) * batch — Keras 3's
// update (Keras 2's fused kernel used the unbiased variance for it). Wherever the
// gradients go (the ps, an all-reduce, Fit's optimizer step) the observation goes too, so
// the ps holds the moving statistics and checkpoints keep them. Replicas that train in
// sync combine their observations as they combine gradients (weighted by slice size),
// so each update folds in the mean of the replicas' batch statistics (as reading
// TensorFlow's ON_READ/MEAN moving statistics of a MirroredStrategy model does).
//
// Inference (Evaluate, Predict): y = gamma * (x - moving_mean) / sqrt(moving_variance +
// epsilon) + beta.

#include <memory>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"
#include "nlohmann/json.hpp"  // a json member (layer.h has only json_fwd.hpp)

namespace pstrain {

class BatchNormalizationLayer : public Layer {
 public:
  // Keys: axis (only the last: -1, [-1] or its index), momentum, epsilon, center, scale,
  // beta/gamma/moving_mean/moving_variance initializers, fused (accepted); regularizers
  // and constraints only unset; renorm, synchronized only false; virtual_batch_size only
  // null.
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  absl::Status Prepare(Backend* backend, int64_t batch) override;
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

 private:
  BatchNormalizationLayer() : Layer("BatchNormalization") {}

  int64_t axis_ = -1;
  double momentum_ = 0.99;  // as configured (the kernels take floats)
  double epsilon_ = 1e-3;
  bool center_ = true;
  bool scale_ = true;
  nlohmann::json renorm_momentum_;  // written back as read (meaningless without renorm)
  Initializer beta_initializer_;
  Initializer gamma_initializer_;
  Initializer moving_mean_initializer_;
  Initializer moving_variance_initializer_;
  int64_t channels_ = 0;
  // Indices into the pass's weights/gradients (-1: not declared).
  int gamma_ = -1, beta_ = -1, moving_mean_ = -1, moving_variance_ = -1;
  // The last training forward's batch statistics, [channels] each.
  DeviceBuffer batch_mean_, batch_variance_;
  // Where dgamma/dbeta go when the layer has no gamma/beta (the kernel computes both).
  DeviceBuffer scratch_dgamma_, scratch_dbeta_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_BATCH_NORMALIZATION_H_
