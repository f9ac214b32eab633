#ifndef PSTRAIN_COMMON_MODEL_LAYERS_WINDOW_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_WINDOW_H_

// Where a 2-D window (a convolution kernel or a pooling window) goes over a
// [height, width, channels] input, as Keras and TensorFlow place it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/math/backend.h"
#include "common/model/layers/layer.h"

namespace pstrain {

// `kernel` and `strides` are {height, width}; `padding` "valid" or "same". "valid": the
// window stays inside, out = floor((in - k) / s) + 1. "same": out = ceil(in / s), with
// max((out - 1) * s + k - in, 0) padding split as TensorFlow does (the odd one at the
// bottom/right). The batch is left 0 (set per pass).
// Errors: INVALID_ARGUMENT an input that is not [h, w, c] or smaller than a "valid" window.
absl::StatusOr<Window2D> PlanWindow2D(const Shape& input, const std::vector<int64_t>& kernel,
                                      const std::vector<int64_t>& strides,
                                      const std::string& padding);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_WINDOW_H_
