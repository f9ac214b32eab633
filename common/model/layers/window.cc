#include "common/model/layers/window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/tensor.h"

namespace pstrain {

absl::StatusOr<Window2D> PlanWindow2D(const Shape& input, const std::vector<int64_t>& kernel,
                                      const std::vector<int64_t>& strides,
                                      const std::string& padding) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "needs an input of shape [height, width, channels] (channels_last), got ",
        ShapeToString(input)));
  }
  Window2D w;
  w.in_h = input[0];
  w.in_w = input[1];
  w.channels = input[2];
  w.k_h = kernel[0];
  w.k_w = kernel[1];
  w.stride_h = strides[0];
  w.stride_w = strides[1];
  auto plan = [&padding](int64_t in, int64_t k, int64_t s, int64_t* out, int64_t* pad) {
    if (padding == "same") {
      *out = (in + s - 1) / s;
      *pad = std::max<int64_t>((*out - 1) * s + k - in, 0) / 2;
    } else {
      *out = in >= k ? (in - k) / s + 1 : 0;
      *pad = 0;
    }
  };
  plan(w.in_h, w.k_h, w.stride_h, &w.out_h, &w.pad_top);
  plan(w.in_w, w.k_w, w.stride_w, &w.out_w, &w.pad_left);
  if (w.out_h < 1 || w.out_w < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", w.k_h, "x", w.k_w, " window with \"valid\" padding does not fit in ",
                     w.in_h, "x", w.in_w));
  }
  return w;
}

}  // namespace pstrain
