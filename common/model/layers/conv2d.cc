#include "common/model/layers/conv2d.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/model/layers/window.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

namespace {

// 16 MiB of columns at most: a training batch's usually fit; an evaluation batch of
// 1000 28x28 images goes in a few chunks.
constexpr int64_t kMaxColumnFloats = int64_t{4} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> Conv2DLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<Conv2DLayer> layer(new Conv2DLayer());
  PS_ASSIGN_OR_RETURN(layer->filters_, config.PositiveInt("filters"));
  PS_ASSIGN_OR_RETURN(layer->kernel_size_, config.IntTuple("kernel_size", 2, 1, std::nullopt));
  PS_ASSIGN_OR_RETURN(layer->strides_,
                      config.IntTuple("strides", 2, 1, std::vector<int64_t>{1, 1}));
  PS_ASSIGN_OR_RETURN(layer->padding_, config.Padding("padding"));
  PS_RETURN_IF_ERROR(config.ChannelsLast());
  PS_ASSIGN_OR_RETURN(std::vector<int64_t> dilation,
                      config.IntTuple("dilation_rate", 2, 1, std::vector<int64_t>{1, 1}));
  if (dilation != std::vector<int64_t>{1, 1}) {
    return config.Error("dilation_rate other than 1 is unsupported");
  }
  PS_ASSIGN_OR_RETURN(int64_t groups, config.Int("groups", 1));
  if (groups != 1) return config.Error("groups other than 1 is unsupported");
  PS_ASSIGN_OR_RETURN(layer->activation_, config.ActivationValue("activation"));
  PS_ASSIGN_OR_RETURN(layer->use_bias_, config.Bool("use_bias", true));
  PS_ASSIGN_OR_RETURN(layer->kernel_initializer_,
                      config.InitializerValue("kernel_initializer", "glorot_uniform"));
  PS_ASSIGN_OR_RETURN(layer->bias_initializer_,
                      config.InitializerValue("bias_initializer", "zeros"));
  for (const char* key : {"kernel_regularizer", "bias_regularizer", "kernel_constraint",
                          "bias_constraint", "lora_rank", "lora_alpha"}) {
    PS_RETURN_IF_ERROR(config.Unsupported(key));
  }
  return std::unique_ptr<Layer>(std::move(layer));
}

absl::StatusOr<Shape> Conv2DLayer::BuildShapes(const Shape& input) {
  PS_ASSIGN_OR_RETURN(window_, PlanWindow2D(input, kernel_size_, strides_, padding_));
  const int64_t c = input[2];
  DeclareVariable({"kernel", {kernel_size_[0], kernel_size_[1], c, filters_},
                   kernel_initializer_});
  if (use_bias_) DeclareVariable({"bias", {filters_}, bias_initializer_});
  return Shape{window_.out_h, window_.out_w, filters_};
}

absl::Status Conv2DLayer::Prepare(Backend* backend, int64_t batch) {
  columns_.Reset();
  window_.batch = batch;
  chunk_ = batch;
  if (input_is_columns()) return absl::OkStatus();
  const int64_t per_sample = window_.out_h * window_.out_w * window_.k_h * window_.k_w *
                             window_.channels;
  chunk_ = std::max<int64_t>(1, std::min(batch, kMaxColumnFloats / per_sample));
  PS_ASSIGN_OR_RETURN(columns_, backend->Allocate(chunk_ * per_sample));
  return absl::OkStatus();
}

const float* Conv2DLayer::Forward(const ForwardPass& p) {
  const int64_t positions = window_.out_h * window_.out_w;
  const int64_t depth = window_.k_h * window_.k_w * window_.channels;
  const int64_t in_sample = window_.in_h * window_.in_w * window_.channels;
  for (int64_t first = 0; first < p.batch; first += chunk_) {
    const int64_t count = std::min(chunk_, p.batch - first);
    const int64_t rows = count * positions;
    const float* columns = p.input + first * in_sample;
    if (!input_is_columns()) {
      p.backend->Im2Col(Chunk(count), columns, columns_.data());
      columns = columns_.data();
    }
    float* out = p.output + first * positions * filters_;
    p.backend->Gemm(false, false, rows, filters_, depth, 1.0f, columns, p.weights[0], 0.0f, out);
    if (use_bias_) p.backend->AddBias(rows, filters_, p.weights[1], out);
    if (!p.skip_activation && activation_ != Activation::kLinear) {
      p.backend->ActivationForward(activation_, rows, filters_, out, out);
    }
  }
  return p.output;
}

float* Conv2DLayer::Backward(const BackwardPass& p) {
  const int64_t positions = window_.out_h * window_.out_w;
  const int64_t depth = window_.k_h * window_.k_w * window_.channels;
  const int64_t in_sample = window_.in_h * window_.in_w * window_.channels;
  if (!p.skip_activation && activation_ != Activation::kLinear) {
    p.backend->ActivationBackward(activation_, p.batch * positions, filters_, p.output, p.dy,
                                  p.dy);
  }
  if (use_bias_) p.backend->ColumnSums(p.batch * positions, filters_, p.dy, p.gradients[1]);
  // The forward left the last chunk's columns; with one chunk they are this batch's.
  const bool have_columns = chunk_ >= p.batch;
  for (int64_t first = 0; first < p.batch; first += chunk_) {
    const int64_t count = std::min(chunk_, p.batch - first);
    const int64_t rows = count * positions;
    const float* x = p.input + first * in_sample;
    const float* dy = p.dy + first * positions * filters_;
    const float* columns = x;
    if (!input_is_columns()) {
      if (!have_columns) p.backend->Im2Col(Chunk(count), x, columns_.data());
      columns = columns_.data();
    }
    // Chunks after the first add to the kernel gradient.
    p.backend->Gemm(true, false, depth, filters_, rows, 1.0f, columns, dy,
                    first == 0 ? 0.0f : 1.0f, p.gradients[0]);
    if (p.dx == nullptr) continue;
    float* dx = p.dx + first * in_sample;
    if (input_is_columns()) {
      p.backend->Gemm(false, true, rows, depth, filters_, 1.0f, dy, p.weights[0], 0.0f, dx);
    } else {
      p.backend->Gemm(false, true, rows, depth, filters_, 1.0f, dy, p.weights[0], 0.0f,
                      columns_.data());
      p.backend->Col2Im(Chunk(count), columns_.data(), dx);
    }
  }
  return p.dx;
}

json Conv2DLayer::KerasConfig() const {
  return {{"filters", filters_},
          {"kernel_size", kernel_size_},
          {"strides", strides_},
          {"padding", padding_},
          {"data_format", "channels_last"},
          {"dilation_rate", {1, 1}},
          {"groups", 1},
          {"activation", ActivationName(activation_)},
          {"use_bias", use_bias_},
          {"kernel_initializer", kernel_initializer_.ToKeras()},
          {"bias_initializer", bias_initializer_.ToKeras()},
          {"kernel_regularizer", nullptr},
          {"bias_regularizer", nullptr},
          {"activity_regularizer", nullptr},
          {"kernel_constraint", nullptr},
          {"bias_constraint", nullptr}};
}

}  // namespace pstrain
