#include "common/math/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// Keras's backend.epsilon(): clip bound for probabilities.
constexpr float kEpsilon = 1e-7f;

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  bool IsHostMemory() const override { return true; }

  absl::StatusOr<DeviceBuffer> Allocate(int64_t size) override {
    if (size < 0) {
      return absl::InvalidArgumentError(absl::StrCat("cpu: negative allocation size ", size));
    }
    if (size == 0) return DeviceBuffer(this, nullptr, 0);
    if (static_cast<uint64_t>(size) > std::numeric_limits<size_t>::max() / sizeof(float)) {
      return absl::ResourceExhaustedError(absl::StrCat("cpu: cannot allocate ", size, " floats"));
    }
    void* p = nullptr;
    // 64-byte alignment: cache lines and the widest SIMD loads.
    if (posix_memalign(&p, 64, static_cast<size_t>(size) * sizeof(float)) != 0) {
      return absl::ResourceExhaustedError(absl::StrCat("cpu: cannot allocate ", size, " floats"));
    }
    return DeviceBuffer(this, static_cast<float*>(p), size);
  }

  absl::Status CopyToDevice(const float* host, int64_t size, float* device) override {
    if (size > 0 && host != device) std::memcpy(device, host, size * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(const float* device, int64_t size, float* host) override {
    if (size > 0 && host != device) std::memcpy(host, device, size * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, const float* b, float beta, float* c) override {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
      // BLAS leaves k == 0 loosely specified; define it as C = beta * C.
      if (beta == 0.0f) {
        std::fill(c, c + m * n, 0.0f);
      } else {
        Scale(m * n, beta, c);
      }
      return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(trans_a ? m : k), b, static_cast<blasint>(trans_b ? k : n),
                beta, c, static_cast<blasint>(n));
  }

  void AddBias(int64_t rows, int64_t cols, const float* bias, float* x) override {
    for (int64_t r = 0; r < rows; ++r) {
      float* row = x + r * cols;
      for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }

  void ColumnSums(int64_t rows, int64_t cols, const float* x, float* out) override {
    std::fill(out, out + cols, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] += row[c];
    }
  }

  void ActivationForward(Activation f, int64_t rows, int64_t cols, const float* x,
                         float* y) override {
    const int64_t n = rows * cols;
    switch (f) {
      case Activation::kLinear:
        if (x != y) std::memcpy(y, x, n * sizeof(float));
        return;
      case Activation::kRelu:
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        return;
      case Activation::kSigmoid:
        for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
        return;
      case Activation::kTanh:
        for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
        return;
      case Activation::kSoftmax:
        for (int64_t r = 0; r < rows; ++r) SoftmaxRow(cols, x + r * cols, y + r * cols);
        return;
    }
  }

  void ActivationBackward(Activation f, int64_t rows, int64_t cols, const float* y,
                          const float* dy, float* dx) override {
    const int64_t n = rows * cols;
    switch (f) {
      case Activation::kLinear:
        if (dx != dy) std::memcpy(dx, dy, n * sizeof(float));
        return;
      case Activation::kRelu:
        for (int64_t i = 0; i < n; ++i) {
          const float g = dy[i];  // loaded unconditionally, so the select vectorizes
          dx[i] = y[i] > 0.0f ? g : 0.0f;
        }
        return;
      case Activation::kSigmoid:
        for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
        return;
      case Activation::kTanh:
        for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        return;
      case Activation::kSoftmax:
        for (int64_t r = 0; r < rows; ++r) {
          const float* yr = y + r * cols;
          const float* dyr = dy + r * cols;
          float* dxr = dx + r * cols;
          float dot = 0.0f;
          for (int64_t c = 0; c < cols; ++c) dot += dyr[c] * yr[c];
          for (int64_t c = 0; c < cols; ++c) dxr[c] = yr[c] * (dyr[c] - dot);
        }
        return;
    }
  }

  void LossForwardBackward(LossKind kind, int64_t rows, int64_t cols, const float* pred,
                           const float* target, float grad_scale, float* loss_rows,
                           float* grad) override {
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = pred + r * cols;
      float* g = grad == nullptr ? nullptr : grad + r * cols;
      switch (kind) {
        case LossKind::kSoftmaxSparseCrossEntropy:
          loss_rows[r] = SoftmaxXentRow(cols, p, nullptr, target[r], grad_scale, g);
          break;
        case LossKind::kSoftmaxCrossEntropy:
          loss_rows[r] = SoftmaxXentRow(cols, p, target + r * cols, -1.0f, grad_scale, g);
          break;
        case LossKind::kSparseCrossEntropy:
          loss_rows[r] = ProbXentRow(cols, p, nullptr, target[r], grad_scale, g);
          break;
        case LossKind::kCrossEntropy:
          loss_rows[r] = ProbXentRow(cols, p, target + r * cols, -1.0f, grad_scale, g);
          break;
        case LossKind::kMeanSquaredError: {
          const float* t = target + r * cols;
          double sum = 0.0;
          for (int64_t c = 0; c < cols; ++c) {
            const float d = p[c] - t[c];
            sum += static_cast<double>(d) * d;
            if (g) g[c] = grad_scale * 2.0f * d / static_cast<float>(cols);
          }
          loss_rows[r] = static_cast<float>(sum / cols);
          break;
        }
        case LossKind::kBinaryCrossEntropy: {
          const float* t = target + r * cols;
          double sum = 0.0;
          for (int64_t c = 0; c < cols; ++c) {
            const float clipped = std::min(std::max(p[c], kEpsilon), 1.0f - kEpsilon);
            // Keras adds epsilon inside the logs on top of the clip.
            const float a = clipped + kEpsilon;
            const float b = 1.0f - clipped + kEpsilon;
            sum -= t[c] * std::log(a) + (1.0f - t[c]) * std::log(b);
            if (g) {
              const bool inside = p[c] > kEpsilon && p[c] < 1.0f - kEpsilon;
              g[c] = inside ? grad_scale * (-t[c] / a + (1.0f - t[c]) / b) /
                                  static_cast<float>(cols)
                            : 0.0f;
            }
          }
          loss_rows[r] = static_cast<float>(sum / cols);
          break;
        }
        case LossKind::kSigmoidBinaryCrossEntropy: {
          const float* t = target + r * cols;
          double sum = 0.0;
          for (int64_t c = 0; c < cols; ++c) {
            const float z = p[c];
            sum += std::max(z, 0.0f) - z * t[c] + std::log1p(std::exp(-std::fabs(z)));
            if (g) {
              const float s = 1.0f / (1.0f + std::exp(-z));
              g[c] = grad_scale * (s - t[c]) / static_cast<float>(cols);
            }
          }
          loss_rows[r] = static_cast<float>(sum / cols);
          break;
        }
      }
    }
  }

  void DropoutForward(int64_t size, float rate, uint64_t seed, const float* x, float* mask,
                      float* y) override {
    const float keep_scale = 1.0f / (1.0f - rate);
    for (int64_t i = 0; i < size; ++i) {
      mask[i] = DropoutUniform(seed, static_cast<uint64_t>(i)) < rate ? 0.0f : keep_scale;
      y[i] = x[i] * mask[i];
    }
  }

  void Multiply(int64_t size, const float* a, const float* b, float* out) override {
    for (int64_t i = 0; i < size; ++i) out[i] = a[i] * b[i];
  }
  void Axpy(int64_t size, float alpha, const float* x, float* y) override {
    for (int64_t i = 0; i < size; ++i) y[i] += alpha * x[i];
  }
  void Scale(int64_t size, float alpha, float* x) override {
    for (int64_t i = 0; i < size; ++i) x[i] *= alpha;
  }

  void CountCorrect(AccuracyKind kind, int64_t rows, int64_t cols, const float* pred,
                    const float* target, float threshold, float* correct) override {
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = pred + r * cols;
      switch (kind) {
        case AccuracyKind::kSparseCategorical:
          correct[r] = static_cast<float>(Argmax(cols, p)) == target[r] ? 1.0f : 0.0f;
          break;
        case AccuracyKind::kCategorical:
          correct[r] = Argmax(cols, p) == Argmax(cols, target + r * cols) ? 1.0f : 0.0f;
          break;
        case AccuracyKind::kBinary:
          correct[r] = (p[0] > threshold) == (target[r] > 0.5f) ? 1.0f : 0.0f;
          break;
      }
    }
  }

  void Copy(int64_t size, const float* x, float* y) override {
    if (size > 0 && x != y) std::memcpy(y, x, size * sizeof(float));
  }

  void Im2Col(const Window2D& w, const float* x, float* cols) override {
    const int64_t c = w.channels;
    const int64_t depth = w.k_h * w.k_w * c;
    for (int64_t b = 0; b < w.batch; ++b) {
      const float* xb = x + b * w.in_h * w.in_w * c;
      for (int64_t oh = 0; oh < w.out_h; ++oh) {
        for (int64_t ow = 0; ow < w.out_w; ++ow) {
          float* row = cols + ((b * w.out_h + oh) * w.out_w + ow) * depth;
          const int64_t iw0 = ow * w.stride_w - w.pad_left;
          const bool inside_w = iw0 >= 0 && iw0 + w.k_w <= w.in_w;
          for (int64_t kh = 0; kh < w.k_h; ++kh) {
            const int64_t ih = oh * w.stride_h + kh - w.pad_top;
            float* dst = row + kh * w.k_w * c;
            if (ih < 0 || ih >= w.in_h) {
              std::fill(dst, dst + w.k_w * c, 0.0f);
            } else if (inside_w) {  // the window's row is contiguous in x
              std::memcpy(dst, xb + (ih * w.in_w + iw0) * c, w.k_w * c * sizeof(float));
            } else {
              for (int64_t kw = 0; kw < w.k_w; ++kw) {
                const int64_t iw = iw0 + kw;
                if (iw < 0 || iw >= w.in_w) {
                  std::fill(dst + kw * c, dst + (kw + 1) * c, 0.0f);
                } else {
                  std::memcpy(dst + kw * c, xb + (ih * w.in_w + iw) * c, c * sizeof(float));
                }
              }
            }
          }
        }
      }
    }
  }

  void Col2Im(const Window2D& w, const float* cols, float* dx) override {
    const int64_t c = w.channels;
    const int64_t depth = w.k_h * w.k_w * c;
    std::fill(dx, dx + w.batch * w.in_h * w.in_w * c, 0.0f);
    for (int64_t b = 0; b < w.batch; ++b) {
      float* db = dx + b * w.in_h * w.in_w * c;
      for (int64_t oh = 0; oh < w.out_h; ++oh) {
        for (int64_t ow = 0; ow < w.out_w; ++ow) {
          const float* row = cols + ((b * w.out_h + oh) * w.out_w + ow) * depth;
          for (int64_t kh = 0; kh < w.k_h; ++kh) {
            const int64_t ih = oh * w.stride_h + kh - w.pad_top;
            if (ih < 0 || ih >= w.in_h) continue;
            for (int64_t kw = 0; kw < w.k_w; ++kw) {
              const int64_t iw = ow * w.stride_w + kw - w.pad_left;
              if (iw < 0 || iw >= w.in_w) continue;
              float* d = db + (ih * w.in_w + iw) * c;
              const float* s = row + (kh * w.k_w + kw) * c;
              for (int64_t k = 0; k < c; ++k) d[k] += s[k];
            }
          }
        }
      }
    }
  }

  void MaxPoolForward(const Window2D& w, const float* x, float* y, float* argmax) override {
    const int64_t c = w.channels;
    for (int64_t b = 0; b < w.batch; ++b) {
      const float* xb = x + b * w.in_h * w.in_w * c;
      for (int64_t oh = 0; oh < w.out_h; ++oh) {
        for (int64_t ow = 0; ow < w.out_w; ++ow) {
          const int64_t o = ((b * w.out_h + oh) * w.out_w + ow) * c;
          float* __restrict yo = y + o;
          float* __restrict ao = argmax + o;
          std::fill(yo, yo + c, -std::numeric_limits<float>::infinity());
          std::fill(ao, ao + c, 0.0f);
          for (int64_t kh = 0; kh < w.k_h; ++kh) {
            const int64_t ih = oh * w.stride_h + kh - w.pad_top;
            if (ih < 0 || ih >= w.in_h) continue;
            for (int64_t kw = 0; kw < w.k_w; ++kw) {
              const int64_t iw = ow * w.stride_w + kw - w.pad_left;
              if (iw < 0 || iw >= w.in_w) continue;
              const float* __restrict xi = xb + (ih * w.in_w + iw) * c;
              const float index = static_cast<float>(kh * w.k_w + kw);
              for (int64_t k = 0; k < c; ++k) {
                // Arithmetic instead of a branch, so the loop vectorizes (GCC does not
                // if-convert it); exact, as the window indices are small integers.
                const float v = xi[k], best = yo[k];
                const float greater = static_cast<float>(v > best);
                yo[k] = std::max(best, v);
                ao[k] += (index - ao[k]) * greater;
              }
            }
          }
        }
      }
    }
  }

  void MaxPoolBackward(const Window2D& w, const float* dy, const float* argmax,
                       float* dx) override {
    const int64_t c = w.channels;
    std::fill(dx, dx + w.batch * w.in_h * w.in_w * c, 0.0f);
    for (int64_t b = 0; b < w.batch; ++b) {
      float* db = dx + b * w.in_h * w.in_w * c;
      for (int64_t oh = 0; oh < w.out_h; ++oh) {
        for (int64_t ow = 0; ow < w.out_w; ++ow) {
          const int64_t o = ((b * w.out_h + oh) * w.out_w + ow) * c;
          for (int64_t k = 0; k < c; ++k) {
            const int64_t index = static_cast<int64_t>(argmax[o + k]);
            const int64_t ih = oh * w.stride_h + index / w.k_w - w.pad_top;
            const int64_t iw = ow * w.stride_w + index % w.k_w - w.pad_left;
            db[(ih * w.in_w + iw) * c + k] += dy[o + k];
          }
        }
      }
    }
  }

  void AvgPoolForward(const Window2D& w, const float* x, float* y) override {
    const int64_t c = w.channels;
    for (int64_t b = 0; b < w.batch; ++b) {
      const float* xb = x + b * w.in_h * w.in_w * c;
      for (int64_t oh = 0; oh < w.out_h; ++oh) {
        for (int64_t ow = 0; ow < w.out_w; ++ow) {
          float* yo = y + ((b * w.out_h + oh) * w.out_w + ow) * c;
          std::fill(yo, yo + c, 0.0f);
          const WindowRange r = Range(w, oh, ow);
          for (int64_t ih = r.h0; ih < r.h1; ++ih) {
            for (int64_t iw = r.w0; iw < r.w1; ++iw) {
              const float* xi = xb + (ih * w.in_w + iw) * c;
              for (int64_t k = 0; k < c; ++k) yo[k] += xi[k];
            }
          }
          const float inv = 1.0f / static_cast<float>(r.count());
          for (int64_t k = 0; k < c; ++k) yo[k] *= inv;
        }
      }
    }
  }

  void AvgPoolBackward(const Window2D& w, const float* dy, float* dx) override {
    const int64_t c = w.channels;
    std::fill(dx, dx + w.batch * w.in_h * w.in_w * c, 0.0f);
    for (int64_t b = 0; b < w.batch; ++b) {
      float* db = dx + b * w.in_h * w.in_w * c;
      for (int64_t oh = 0; oh < w.out_h; ++oh) {
        for (int64_t ow = 0; ow < w.out_w; ++ow) {
          const float* dyo = dy + ((b * w.out_h + oh) * w.out_w + ow) * c;
          const WindowRange r = Range(w, oh, ow);
          const float inv = 1.0f / static_cast<float>(r.count());
          for (int64_t ih = r.h0; ih < r.h1; ++ih) {
            for (int64_t iw = r.w0; iw < r.w1; ++iw) {
              float* d = db + (ih * w.in_w + iw) * c;
              for (int64_t k = 0; k < c; ++k) d[k] += dyo[k] * inv;
            }
          }
        }
      }
    }
  }

  void MeanOverPositions(int64_t batch, int64_t positions, int64_t channels, const float* x,
                         float* y) override {
    const float inv = 1.0f / static_cast<float>(positions);
    for (int64_t b = 0; b < batch; ++b) {
      float* yb = y + b * channels;
      std::fill(yb, yb + channels, 0.0f);
      for (int64_t p = 0; p < positions; ++p) {
        const float* xp = x + (b * positions + p) * channels;
        for (int64_t k = 0; k < channels; ++k) yb[k] += xp[k];
      }
      for (int64_t k = 0; k < channels; ++k) yb[k] *= inv;
    }
  }

  void MeanOverPositionsBackward(int64_t batch, int64_t positions, int64_t channels,
                                 const float* dy, float* dx) override {
    const float inv = 1.0f / static_cast<float>(positions);
    for (int64_t b = 0; b < batch; ++b) {
      const float* dyb = dy + b * channels;
      for (int64_t p = 0; p < positions; ++p) {
        float* dxp = dx + (b * positions + p) * channels;
        for (int64_t k = 0; k < channels; ++k) dxp[k] = dyb[k] * inv;
      }
    }
  }

  void ColumnMoments(int64_t rows, int64_t cols, const float* x, float* mean,
                     float* var) override {
    sums_.assign(2 * cols, 0.0);
    double* sum = sums_.data();
    double* sq = sums_.data() + cols;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      for (int64_t c = 0; c < cols; ++c) sum[c] += xr[c];
    }
    for (int64_t c = 0; c < cols; ++c) sum[c] /= static_cast<double>(rows);
    // Two passes (mean, then squared deviations): no cancellation for large means.
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const double d = xr[c] - sum[c];
        sq[c] += d * d;
      }
    }
    for (int64_t c = 0; c < cols; ++c) {
      mean[c] = static_cast<float>(sum[c]);
      var[c] = static_cast<float>(sq[c] / static_cast<double>(rows));
    }
  }

  void BatchNormForward(int64_t rows, int64_t cols, const float* x, const float* mean,
                        const float* var, const float* gamma, const float* beta,
                        float epsilon, float* y) override {
    // y = x * a + b per column, with a = gamma * invstd and b = beta - mean * a.
    scale_shift_.resize(2 * cols);
    float* a = scale_shift_.data();
    float* s = scale_shift_.data() + cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float invstd = 1.0f / std::sqrt(var[c] + epsilon);
      a[c] = (gamma ? gamma[c] : 1.0f) * invstd;
      s[c] = (beta ? beta[c] : 0.0f) - mean[c] * a[c];
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * a[c] + s[c];
    }
  }

  void BatchNormBackward(int64_t rows, int64_t cols, const float* x, const float* dy,
                         const float* mean, const float* var, const float* gamma,
                         float epsilon, float* dgamma, float* dbeta, float* dx) override {
    sums_.assign(2 * cols, 0.0);
    double* sum_dy = sums_.data();
    double* sum_dy_xhat = sums_.data() + cols;
    scale_shift_.resize(cols);
    float* invstd = scale_shift_.data();
    for (int64_t c = 0; c < cols; ++c) invstd[c] = 1.0f / std::sqrt(var[c] + epsilon);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      const float* dyr = dy + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        sum_dy[c] += dyr[c];
        sum_dy_xhat[c] += dyr[c] * ((xr[c] - mean[c]) * invstd[c]);
      }
    }
    for (int64_t c = 0; c < cols; ++c) {
      dbeta[c] = static_cast<float>(sum_dy[c]);
      dgamma[c] = static_cast<float>(sum_dy_xhat[c]);
    }
    if (dx == nullptr) return;
    const float n = static_cast<float>(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      const float* dyr = dy + r * cols;
      float* dxr = dx + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const float xhat = (xr[c] - mean[c]) * invstd[c];
        const float k = (gamma ? gamma[c] : 1.0f) * invstd[c] / n;
        dxr[c] = k * (n * dyr[c] - dbeta[c] - xhat * dgamma[c]);
      }
    }
  }

  void GatherRows(int64_t n, int64_t dim, const float* ids, const float* table,
                  float* out) override {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = static_cast<int64_t>(ids[i]);
      std::memcpy(out + i * dim, table + row * dim, dim * sizeof(float));
    }
  }

  void ScatterAddRows(int64_t n, int64_t dim, int64_t vocab, const float* ids, const float* dy,
                      float* dtable) override {
    std::fill(dtable, dtable + vocab * dim, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      float* d = dtable + static_cast<int64_t>(ids[i]) * dim;
      const float* g = dy + i * dim;
      for (int64_t k = 0; k < dim; ++k) d[k] += g[k];
    }
  }

 protected:
  void Free(float* data) override { std::free(data); }

 private:
  // The input rows [h0, h1) and columns [w0, w1) a pooling window covers, padding cut off.
  struct WindowRange {
    int64_t h0, h1, w0, w1;
    int64_t count() const { return (h1 - h0) * (w1 - w0); }
  };
  static WindowRange Range(const Window2D& w, int64_t oh, int64_t ow) {
    const int64_t h = oh * w.stride_h - w.pad_top;
    const int64_t v = ow * w.stride_w - w.pad_left;
    return {std::max<int64_t>(h, 0), std::min(h + w.k_h, w.in_h), std::max<int64_t>(v, 0),
            std::min(v + w.k_w, w.in_w)};
  }

  // Scratch reused across calls (a backend serves one thread), so the batch-normalization
  // kernels allocate nothing per step.
  std::vector<double> sums_;
  std::vector<float> scale_shift_;

  static int64_t Argmax(int64_t n, const float* x) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (x[i] > x[best]) best = i;
    }
    return best;
  }

  static void SoftmaxRow(int64_t n, const float* x, float* y) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      y[i] = std::exp(x[i] - m);
      sum += y[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }

  // Cross-entropy of softmax(z) against `t` (dense) or the one-hot of `label` (t null).
  // Uses log-sum-exp with the max subtracted, so large logits give no inf/nan.
  static float SoftmaxXentRow(int64_t n, const float* z, const float* t, float label,
                              float scale, float* g) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, z[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(z[i] - m));
    const double log_z = m + std::log(sum);
    const int64_t y = static_cast<int64_t>(label);
    if (t == nullptr && (y < 0 || y >= n)) {
      // Out-of-range label: the caller validates; make the failure visible, not silent.
      if (g) std::fill(g, g + n, 0.0f);
      return std::numeric_limits<float>::quiet_NaN();
    }
    double loss = 0.0;
    double t_sum = 0.0;
    if (t == nullptr) {
      loss = log_z - z[y];
      t_sum = 1.0;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        if (t[i] != 0.0f) loss += t[i] * (log_z - z[i]);
        t_sum += t[i];
      }
    }
    if (g) {
      for (int64_t i = 0; i < n; ++i) {
        const double p = std::exp(z[i] - log_z);
        const double ti = t == nullptr ? (i == y ? 1.0 : 0.0) : t[i];
        g[i] = static_cast<float>(scale * (p * t_sum - ti));
      }
    }
    return static_cast<float>(loss);
  }

  // Cross-entropy on probabilities p: q = p / sum(p), clipped to [eps, 1-eps] (Keras 3).
  // The clip's gradient is zero outside the range, as with tf.clip_by_value.
  static float ProbXentRow(int64_t n, const float* p, const float* t, float label,
                           float scale, float* g) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += p[i];
    const int64_t y = static_cast<int64_t>(label);
    if (t == nullptr && (y < 0 || y >= n)) {
      if (g) std::fill(g, g + n, 0.0f);
      return std::numeric_limits<float>::quiet_NaN();
    }
    if (s <= 0.0) s = kEpsilon;  // all-zero row: the clip decides the loss
    double loss = 0.0;
    double gq_dot_q = 0.0;  // sum_k dL/dq_k * q_k
    for (int64_t i = 0; i < n; ++i) {
      const double ti = t == nullptr ? (i == y ? 1.0 : 0.0) : t[i];
      if (ti == 0.0) continue;
      const double q = p[i] / s;
      const double qc = std::min(std::max(q, static_cast<double>(kEpsilon)),
                                 1.0 - static_cast<double>(kEpsilon));
      loss -= ti * std::log(qc);
      if (q > kEpsilon && q < 1.0 - kEpsilon) gq_dot_q += -ti;  // (-t/q) * q
    }
    if (g) {
      for (int64_t i = 0; i < n; ++i) {
        const double ti = t == nullptr ? (i == y ? 1.0 : 0.0) : t[i];
        const double q = p[i] / s;
        const bool inside = q > kEpsilon && q < 1.0 - kEpsilon;
        const double gq = (ti != 0.0 && inside) ? -ti / q : 0.0;
        g[i] = static_cast<float>(scale * (gq - gq_dot_q) / s);
      }
    }
    return static_cast<float>(loss);
  }
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace pstrain
