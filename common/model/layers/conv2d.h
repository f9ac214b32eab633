#ifndef PSTRAIN_COMMON_MODEL_LAYERS_CONV2D_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_CONV2D_H_

// Keras Conv2D, channels_last: [batch, h, w, c] -> [batch, out_h, out_w, filters], kernel
// [kh, kw, c, filters] (Keras's layout), bias [filters]. Computed as im2col (one row of
// kh*kw*c input values per output position) times the kernel seen as a
// [kh*kw*c, filters] matrix: one sgemm (cuBLAS on a GPU) per chunk of samples. Backward:
// kernel gradient = columns^T dy, input gradient = col2im(dy kernel^T). The columns of a
// large batch (an evaluation batch of 1000) would take hundreds of MB, so they are built
// for at most kMaxColumnFloats at a time; a training batch usually fits in one chunk,
// whose columns the backward pass then reuses instead of building them again.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layers/layer.h"

namespace pstrain {

class Conv2DLayer : public Layer {
 public:
  // Keys: filters, kernel_size (required), strides, padding (valid | same), activation,
  // use_bias, kernel_initializer, bias_initializer; data_format only channels_last,
  // dilation_rate only 1, groups only 1; regularizers, constraints and lora only unset.
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config);

  Activation output_activation() const override { return activation_; }
  absl::Status Prepare(Backend* backend, int64_t batch) override;
  const float* Forward(const ForwardPass& pass) override;
  float* Backward(const BackwardPass& pass) override;

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override;
  nlohmann::json KerasConfig() const override;

 private:
  Conv2DLayer() : Layer("Conv2D") {}

  // A 1x1 kernel with stride 1 reads the input as its own columns.
  bool input_is_columns() const {
    return window_.k_h == 1 && window_.k_w == 1 && window_.stride_h == 1 &&
           window_.stride_w == 1;
  }

  // The window over samples [first, first + count) of the batch.
  Window2D Chunk(int64_t count) const {
    Window2D w = window_;
    w.batch = count;
    return w;
  }

  int64_t filters_ = 0;
  std::vector<int64_t> kernel_size_;
  std::vector<int64_t> strides_;
  std::string padding_;
  Activation activation_ = Activation::kLinear;
  bool use_bias_ = true;
  Initializer kernel_initializer_;
  Initializer bias_initializer_;
  Window2D window_;
  // Samples per chunk, and the columns of one chunk: [chunk * out_h * out_w, kh * kw * c],
  // reused for the input gradient's columns once the kernel gradient is taken.
  int64_t chunk_ = 0;
  DeviceBuffer columns_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_CONV2D_H_
