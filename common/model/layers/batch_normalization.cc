#include "common/model/layers/batch_normalization.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

absl::StatusOr<std::unique_ptr<Layer>> BatchNormalizationLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<BatchNormalizationLayer> layer(new BatchNormalizationLayer());
  json axis = config.Raw("axis");
  if (axis.is_array() && axis.size() == 1) axis = axis[0];
  if (!axis.is_null()) {
    if (!axis.is_number_integer()) return config.Error("axis must be an integer (the last)");
    layer->axis_ = axis.get<int64_t>();
  }
  PS_ASSIGN_OR_RETURN(double momentum, config.Number("momentum", 0.99));
  if (!(momentum >= 0.0 && momentum <= 1.0)) return config.Error("momentum must be in [0, 1]");
  layer->momentum_ = momentum;
  PS_ASSIGN_OR_RETURN(double epsilon, config.Number("epsilon", 1e-3));
  if (!(epsilon > 0.0)) return config.Error("epsilon must be positive");
  layer->epsilon_ = epsilon;
  PS_ASSIGN_OR_RETURN(layer->center_, config.Bool("center", true));
  PS_ASSIGN_OR_RETURN(layer->scale_, config.Bool("scale", true));
  PS_ASSIGN_OR_RETURN(layer->beta_initializer_,
                      config.InitializerValue("beta_initializer", "zeros"));
  PS_ASSIGN_OR_RETURN(layer->gamma_initializer_,
                      config.InitializerValue("gamma_initializer", "ones"));
  PS_ASSIGN_OR_RETURN(layer->moving_mean_initializer_,
                      config.InitializerValue("moving_mean_initializer", "zeros"));
  PS_ASSIGN_OR_RETURN(layer->moving_variance_initializer_,
                      config.InitializerValue("moving_variance_initializer", "ones"));
  for (const char* key : {"beta_regularizer", "gamma_regularizer", "beta_constraint",
                          "gamma_constraint", "renorm_clipping", "virtual_batch_size",
                          "adjustment"}) {
    PS_RETURN_IF_ERROR(config.Unsupported(key));
  }
  PS_RETURN_IF_ERROR(config.Unsupported("renorm", false));
  PS_RETURN_IF_ERROR(config.Unsupported("synchronized", false));
  // Only used with renorm; Keras writes its default either way.
  layer->renorm_momentum_ = config.Raw("renorm_momentum");
  // Keras 2's choice of kernel: the same math.
  PS_ASSIGN_OR_RETURN(bool fused, config.Bool("fused", true));
  (void)fused;
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::StatusOr<Shape> BatchNormalizationLayer::BuildShapes(const Shape& input) {
  if (axis_ != -1 && axis_ != static_cast<int64_t>(input.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis_, " is unsupported (only the last axis, channels_last)"));
  }
  channels_ = input.back();
  int index = 0;
  if (scale_) {
    gamma_ = index++;
    DeclareVariable({"gamma", {channels_}, gamma_initializer_});
  }
  if (center_) {
    beta_ = index++;
    DeclareVariable({"beta", {channels_}, beta_initializer_});
  }
  moving_mean_ = index++;
  DeclareVariable({"moving_mean", {channels_}, moving_mean_initializer_, false,
                   static_cast<float>(momentum_)});
  moving_variance_ = index++;
  DeclareVariable(
      {"moving_variance", {channels_}, moving_variance_initializer_, false,
       static_cast<float>(momentum_)});
  return input;
}

absl::Status BatchNormalizationLayer::Prepare(Backend* backend, int64_t batch) {
  if (batch_mean_.data() != nullptr) return absl::OkStatus();  // independent of the batch
  PS_ASSIGN_OR_RETURN(batch_mean_, backend->Allocate(channels_));
  PS_ASSIGN_OR_RETURN(batch_variance_, backend->Allocate(channels_));
  if (!scale_) {
    PS_ASSIGN_OR_RETURN(scratch_dgamma_, backend->Allocate(channels_));
  }
  if (!center_) {
    PS_ASSIGN_OR_RETURN(scratch_dbeta_, backend->Allocate(channels_));
  }
  return absl::OkStatus();
}

const float* BatchNormalizationLayer::Forward(const ForwardPass& p) {
  const int64_t rows = RowsOf(input_shape(), p.batch);
  const float epsilon = static_cast<float>(epsilon_);
  const float* gamma = scale_ ? p.weights[gamma_] : nullptr;
  const float* beta = center_ ? p.weights[beta_] : nullptr;
  if (p.training) {
    p.backend->ColumnMoments(rows, channels_, p.input, batch_mean_.data(),
                             batch_variance_.data());
    p.backend->BatchNormForward(rows, channels_, p.input, batch_mean_.data(),
                                batch_variance_.data(), gamma, beta, epsilon, p.output);
  } else {
    p.backend->BatchNormForward(rows, channels_, p.input, p.weights[moving_mean_],
                                p.weights[moving_variance_], gamma, beta, epsilon, p.output);
  }
  return p.output;
}

float* BatchNormalizationLayer::Backward(const BackwardPass& p) {
  const int64_t rows = RowsOf(input_shape(), p.batch);
  p.backend->BatchNormBackward(rows, channels_, p.input, p.dy, batch_mean_.data(),
                               batch_variance_.data(), scale_ ? p.weights[gamma_] : nullptr,
                               static_cast<float>(epsilon_),
                               scale_ ? p.gradients[gamma_] : scratch_dgamma_.data(),
                               center_ ? p.gradients[beta_] : scratch_dbeta_.data(), p.dx);
  // The observations the moving statistics' update rule folds in.
  p.backend->Copy(channels_, batch_mean_.data(), p.gradients[moving_mean_]);
  p.backend->Copy(channels_, batch_variance_.data(), p.gradients[moving_variance_]);
  return p.dx;
}

json BatchNormalizationLayer::KerasConfig() const {
  return {{"axis", -1},
          {"momentum", momentum_},
          {"epsilon", epsilon_},
          {"center", center_},
          {"scale", scale_},
          {"beta_initializer", beta_initializer_.ToKeras()},
          {"gamma_initializer", gamma_initializer_.ToKeras()},
          {"moving_mean_initializer", moving_mean_initializer_.ToKeras()},
          {"moving_variance_initializer", moving_variance_initializer_.ToKeras()},
          {"beta_regularizer", nullptr},
          {"gamma_regularizer", nullptr},
          {"beta_constraint", nullptr},
          {"gamma_constraint", nullptr},
          {"synchronized", false},
          {"renorm", false},
          {"renorm_clipping", nullptr},
          {"renorm_momentum", renorm_momentum_.is_null() ? json(0.99) : renorm_momentum_}};
}

}  // namespace pstrain
