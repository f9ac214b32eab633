// The CUDA backend's own kernels. Each one mirrors a loop of cpu_backend.cc, including its
// choice of float vs double accumulation, so that the two backends agree to rounding (the
// order of a parallel sum differs; nothing else should).
//
// Layout conventions:
// - Elementwise kernels use a grid-stride loop over int64 indices, so any size works with
//   a bounded grid.
// - Row kernels (softmax, losses) give each row one block and reduce with BlockReduce; the
//   block loops over rows when there are more rows than blocks.

#include "common/math/cuda_kernels.h"

#include <cmath>
#include <cstdint>

namespace pstrain {
namespace cuda_kernels {
namespace {

// Keep in step with Activation, LossKind and AccuracyKind in backend.h (cuda_backend.cc
// static_asserts the values).
enum : int { kLinear = 0, kRelu = 1, kSigmoid = 2, kTanh = 3, kSoftmax = 4 };
enum : int {
  kSoftmaxSparseCrossEntropy = 0,
  kSoftmaxCrossEntropy = 1,
  kSparseCrossEntropy = 2,
  kCrossEntropy = 3,
  kMeanSquaredError = 4,
  kBinaryCrossEntropy = 5,
  kSigmoidBinaryCrossEntropy = 6,
};
enum : int { kSparseCategorical = 0, kCategorical = 1, kBinary = 2 };

// Keras's backend.epsilon(), as in cpu_backend.cc.
constexpr float kEpsilon = 1e-7f;

constexpr int kThreads = 256;
// Enough blocks to fill an H100/H200 (132 SMs) many times over; larger sizes loop.
constexpr int64_t kMaxBlocks = 8192;

int ElementwiseBlocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// One block per row up to the grid limit; the kernels loop over the rest.
int RowBlocks(int64_t rows) {
  return static_cast<int>(rows < 65535 ? rows : 65535);
}

// A power of two in [32, 256] close to `cols`: narrow rows (binary outputs, 10 classes)
// should not park 224 idle threads per block.
int RowThreads(int64_t cols) {
  int t = 32;
  while (t < kThreads && t < cols) t *= 2;
  return t;
}

// splitmix64, bit for bit the arithmetic of pstrain::DropoutUniform in backend.h, so that a
// CPU and a GPU worker drop the same units for the same seed.
__device__ __forceinline__ float DeviceDropoutUniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + index + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z = z ^ (z >> 31);
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  // fmaxf ignores a NaN operand like std::max(m, x) does when x is NaN.
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Block-wide reduction; every thread gets the same result (each thread combines the
// per-warp partials in the same order, so the value is identical across threads).
// blockDim.x must be a multiple of 32 and at most 1024; `scratch` holds 32 T in shared
// memory. The leading barrier lets consecutive reductions reuse one scratch array.
template <typename T, typename Op>
__device__ T BlockReduce(T v, Op op, T* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = scratch[0];
  for (int w = 1; w < warps; ++w) total = op(total, scratch[w]);
  return total;
}

// CPU: static_cast<int64_t>(label) then a range check. Truncation maps (-1, n) onto
// [0, n-1]; anything else (including NaN, for which the cast is undefined) is invalid.
__device__ __forceinline__ bool LabelIndex(float label, int64_t n, int64_t* y) {
  if (!(label > -1.0f && label < static_cast<float>(n))) return false;
  *y = static_cast<int64_t>(label);
  return *y >= 0 && *y < n;
}

__global__ void AddBiasKernel(int64_t rows, int64_t cols, const float* bias, float* x) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] += bias[i % cols];
  }
}

// Block of 32 x 8 threads: x walks 32 adjacent columns (coalesced reads of a row), y splits
// the rows 8 ways; the 8 partials are then added in shared memory.
constexpr int kColTileX = 32;
constexpr int kColTileY = 8;

__global__ void ColumnSumsKernel(int64_t rows, int64_t cols, const float* x, float* out) {
  __shared__ float partial[kColTileY][kColTileX];
  for (int64_t c0 = blockIdx.x * static_cast<int64_t>(kColTileX); c0 < cols;
       c0 += static_cast<int64_t>(gridDim.x) * kColTileX) {
    const int64_t c = c0 + threadIdx.x;
    float sum = 0.0f;
    if (c < cols) {
      for (int64_t r = threadIdx.y; r < rows; r += kColTileY) sum += x[r * cols + c];
    }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      float total = 0.0f;
      for (int j = 0; j < kColTileY; ++j) total += partial[j][threadIdx.x];
      out[c] = total;
    }
    __syncthreads();
  }
}

__global__ void FillKernel(int64_t n, float value, float* x) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = value;
  }
}

__global__ void ElementwiseForwardKernel(int activation, int64_t n, const float* x, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    switch (activation) {
      case kRelu:
        y[i] = v > 0.0f ? v : 0.0f;
        break;
      case kSigmoid:
        y[i] = 1.0f / (1.0f + expf(-v));
        break;
      case kTanh:
        y[i] = tanhf(v);
        break;
      default:  // kLinear
        y[i] = v;
        break;
    }
  }
}

__global__ void ElementwiseBackwardKernel(int activation, int64_t n, const float* y,
                                          const float* dy, float* dx) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = dy[i];
    switch (activation) {
      case kRelu:
        dx[i] = y[i] > 0.0f ? g : 0.0f;
        break;
      case kSigmoid:
        dx[i] = g * y[i] * (1.0f - y[i]);
        break;
      case kTanh:
        dx[i] = g * (1.0f - y[i] * y[i]);
        break;
      default:  // kLinear
        dx[i] = g;
        break;
    }
  }
}

// Row softmax with the max subtracted. In place is safe: the reductions finish reading the
// row (barriers inside BlockReduce) before any thread writes, and each element is then read
// and written by the same thread.
__global__ void SoftmaxForwardKernel(int64_t rows, int64_t cols, const float* x, float* y) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = BlockReduce(m, MaxOp(), scratch);
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    sum = BlockReduce(sum, SumOp(), scratch);
    const float inv = 1.0f / sum;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
  }
}

// dx = y * (dy - sum(dy * y)) per row; in place (dx == dy) safe as above.
__global__ void SoftmaxBackwardKernel(int64_t rows, int64_t cols, const float* y,
                                      const float* dy, float* dx) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += dyr[c] * yr[c];
    dot = BlockReduce(dot, SumOp(), scratch);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dxr[c] = yr[c] * (dyr[c] - dot);
  }
}

// Cross-entropy of softmax(z) against `t` (dense) or the one-hot of `label` (t null), by
// log-sum-exp with the max subtracted (cpu_backend.cc SoftmaxXentRow).
__device__ float SoftmaxXentRow(int64_t n, const float* z, const float* t, float label,
                                float scale, float* g, float* fscratch, double* dscratch) {
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, z[i]);
  m = BlockReduce(m, MaxOp(), fscratch);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sum += exp(static_cast<double>(z[i] - m));
  }
  sum = BlockReduce(sum, SumOp(), dscratch);
  const double log_z = m + log(sum);
  int64_t y = -1;
  if (t == nullptr && !LabelIndex(label, n, &y)) {
    // Out-of-range label: visible as NaN, as on the CPU.
    if (g) {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) g[i] = 0.0f;
    }
    return NAN;
  }
  double loss = 0.0;
  double t_sum = 0.0;
  if (t == nullptr) {
    loss = log_z - z[y];
    t_sum = 1.0;
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      if (t[i] != 0.0f) loss += t[i] * (log_z - z[i]);
      t_sum += t[i];
    }
    loss = BlockReduce(loss, SumOp(), dscratch);
    t_sum = BlockReduce(t_sum, SumOp(), dscratch);
  }
  if (g) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const double p = exp(z[i] - log_z);
      const double ti = t == nullptr ? (i == y ? 1.0 : 0.0) : t[i];
      g[i] = static_cast<float>(scale * (p * t_sum - ti));
    }
  }
  return static_cast<float>(loss);
}

// Cross-entropy on probabilities: q = p / sum(p), clipped to [eps, 1-eps]; the clip's
// gradient is zero outside the range (cpu_backend.cc ProbXentRow).
__device__ float ProbXentRow(int64_t n, const float* p, const float* t, float label,
                             float scale, float* g, double* dscratch) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += p[i];
  s = BlockReduce(s, SumOp(), dscratch);
  int64_t y = -1;
  if (t == nullptr && !LabelIndex(label, n, &y)) {
    if (g) {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) g[i] = 0.0f;
    }
    return NAN;
  }
  if (s <= 0.0) s = kEpsilon;  // all-zero row: the clip decides the loss
  const double lo = static_cast<double>(kEpsilon);
  const double hi = 1.0 - static_cast<double>(kEpsilon);
  double loss = 0.0;
  double gq_dot_q = 0.0;  // sum_k dL/dq_k * q_k
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double ti = t == nullptr ? (i == y ? 1.0 : 0.0) : t[i];
    if (ti == 0.0) continue;
    const double q = p[i] / s;
    const double qc = fmin(fmax(q, lo), hi);
    loss -= ti * log(qc);
    if (q > lo && q < hi) gq_dot_q += -ti;  // (-t/q) * q
  }
  loss = BlockReduce(loss, SumOp(), dscratch);
  gq_dot_q = BlockReduce(gq_dot_q, SumOp(), dscratch);
  if (g) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const double ti = t == nullptr ? (i == y ? 1.0 : 0.0) : t[i];
      const double q = p[i] / s;
      const bool inside = q > lo && q < hi;
      const double gq = (ti != 0.0 && inside) ? -ti / q : 0.0;
      g[i] = static_cast<float>(scale * (gq - gq_dot_q) / s);
    }
  }
  return static_cast<float>(loss);
}

__device__ float MseRow(int64_t n, const float* p, const float* t, float scale, float* g,
                        double* dscratch) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = p[i] - t[i];
    sum += static_cast<double>(d) * d;
    if (g) g[i] = scale * 2.0f * d / static_cast<float>(n);
  }
  sum = BlockReduce(sum, SumOp(), dscratch);
  return static_cast<float>(sum / n);
}

// Keras's BCE on probabilities: clip, then epsilon added inside the logs.
__device__ float BceRow(int64_t n, const float* p, const float* t, float scale, float* g,
                        double* dscratch) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float clipped = fminf(fmaxf(p[i], kEpsilon), 1.0f - kEpsilon);
    const float a = clipped + kEpsilon;
    const float b = 1.0f - clipped + kEpsilon;
    sum -= t[i] * logf(a) + (1.0f - t[i]) * logf(b);
    if (g) {
      const bool inside = p[i] > kEpsilon && p[i] < 1.0f - kEpsilon;
      g[i] = inside ? scale * (-t[i] / a + (1.0f - t[i]) / b) / static_cast<float>(n) : 0.0f;
    }
  }
  sum = BlockReduce(sum, SumOp(), dscratch);
  return static_cast<float>(sum / n);
}

// Fused sigmoid + BCE on logits in the stable form max(z,0) - z*t + log1p(exp(-|z|)).
__device__ float SigmoidBceRow(int64_t n, const float* z, const float* t, float scale,
                               float* g, double* dscratch) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float zi = z[i];
    sum += fmaxf(zi, 0.0f) - zi * t[i] + log1pf(expf(-fabsf(zi)));
    if (g) {
      const float s = 1.0f / (1.0f + expf(-zi));
      g[i] = scale * (s - t[i]) / static_cast<float>(n);
    }
  }
  sum = BlockReduce(sum, SumOp(), dscratch);
  return static_cast<float>(sum / n);
}

__global__ void LossKernel(int kind, int64_t rows, int64_t cols, const float* pred,
                           const float* target, float grad_scale, float* loss_rows,
                           float* grad) {
  __shared__ float fscratch[32];
  __shared__ double dscratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* p = pred + r * cols;
    const float* t = target + r * cols;  // dense kinds only
    float* g = grad == nullptr ? nullptr : grad + r * cols;
    float loss = 0.0f;
    switch (kind) {
      case kSoftmaxSparseCrossEntropy:
        loss = SoftmaxXentRow(cols, p, nullptr, target[r], grad_scale, g, fscratch, dscratch);
        break;
      case kSoftmaxCrossEntropy:
        loss = SoftmaxXentRow(cols, p, t, -1.0f, grad_scale, g, fscratch, dscratch);
        break;
      case kSparseCrossEntropy:
        loss = ProbXentRow(cols, p, nullptr, target[r], grad_scale, g, dscratch);
        break;
      case kCrossEntropy:
        loss = ProbXentRow(cols, p, t, -1.0f, grad_scale, g, dscratch);
        break;
      case kMeanSquaredError:
        loss = MseRow(cols, p, t, grad_scale, g, dscratch);
        break;
      case kBinaryCrossEntropy:
        loss = BceRow(cols, p, t, grad_scale, g, dscratch);
        break;
      case kSigmoidBinaryCrossEntropy:
        loss = SigmoidBceRow(cols, p, t, grad_scale, g, dscratch);
        break;
      default:
        loss = NAN;
        break;
    }
    if (threadIdx.x == 0) loss_rows[r] = loss;
  }
}

__global__ void DropoutKernel(int64_t n, float rate, float keep_scale, uint64_t seed,
                              const float* x, float* mask, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float m =
        DeviceDropoutUniform(seed, static_cast<uint64_t>(i)) < rate ? 0.0f : keep_scale;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void DropoutDrawsKernel(uint64_t seed, uint64_t first, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = DeviceDropoutUniform(seed, first + static_cast<uint64_t>(i));
  }
}

__global__ void MultiplyKernel(int64_t n, const float* a, const float* b, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = a[i] * b[i];
  }
}

__global__ void AxpyKernel(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += alpha * x[i];
  }
}

__global__ void ScaleKernel(int64_t n, float alpha, float* x) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] *= alpha;
  }
}

// First index of the maximum (strict >), as the CPU's Argmax.
__device__ int64_t Argmax(int64_t n, const float* x) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

// One thread per row: the rows are independent and short (class counts).
__global__ void CountCorrectKernel(int kind, int64_t rows, int64_t cols, const float* pred,
                                   const float* target, float threshold, float* correct) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float* p = pred + r * cols;
    bool ok = false;
    switch (kind) {
      case kSparseCategorical:
        ok = static_cast<float>(Argmax(cols, p)) == target[r];
        break;
      case kCategorical:
        ok = Argmax(cols, p) == Argmax(cols, target + r * cols);
        break;
      default:  // kBinary
        ok = (p[0] > threshold) == (target[r] > 0.5f);
        break;
    }
    correct[r] = ok ? 1.0f : 0.0f;
  }
}

// --- Convolution and pooling -------------------------------------------------------------
// One thread per output element of each op; the backward ops gather over the windows that
// cover an input element (no atomics: deterministic, and the same order as the CPU's sum
// for each element up to the order of its terms).

#define PS_GRID_STRIDE_LOOP(i, n)                                                   \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void Im2ColKernel(Window w, const float* x, float* cols) {
  const int64_t depth = w.k_h * w.k_w * w.channels;
  const int64_t n = w.batch * w.out_h * w.out_w * depth;
  PS_GRID_STRIDE_LOOP(i, n) {
    const int64_t row = i / depth;
    const int64_t k = i % depth;
    const int64_t c = k % w.channels;
    const int64_t kw = (k / w.channels) % w.k_w;
    const int64_t kh = k / (w.channels * w.k_w);
    const int64_t ow = row % w.out_w;
    const int64_t oh = (row / w.out_w) % w.out_h;
    const int64_t b = row / (w.out_w * w.out_h);
    const int64_t ih = oh * w.stride_h + kh - w.pad_top;
    const int64_t iw = ow * w.stride_w + kw - w.pad_left;
    cols[i] = (ih < 0 || ih >= w.in_h || iw < 0 || iw >= w.in_w)
                  ? 0.0f
                  : x[((b * w.in_h + ih) * w.in_w + iw) * w.channels + c];
  }
}

// An element's coordinates in a [batch, h, w, c] tensor of the window's input or output.
struct Coordinates {
  int64_t b, h, w, c;
};

__device__ __forceinline__ Coordinates At(int64_t i, int64_t height, int64_t width,
                                          int64_t channels) {
  return {i / (channels * width * height), (i / (channels * width)) % height,
          (i / channels) % width, i % channels};
}

__device__ __forceinline__ Coordinates InputAt(const Window& w, int64_t i) {
  return At(i, w.in_h, w.in_w, w.channels);
}

__device__ __forceinline__ Coordinates OutputAt(const Window& w, int64_t i) {
  return At(i, w.out_h, w.out_w, w.channels);
}

// The output rows (columns) whose window covers input row ih: [first, last].
__device__ __forceinline__ void Covering(int64_t i, int64_t pad, int64_t k, int64_t stride,
                                         int64_t out, int64_t* first, int64_t* last) {
  const int64_t p = i + pad;  // position in the padded input
  *first = p < k ? 0 : (p - k) / stride + 1;
  *last = p / stride;
  if (*last > out - 1) *last = out - 1;
}

__global__ void Col2ImKernel(Window w, const float* cols, float* dx) {
  const int64_t depth = w.k_h * w.k_w * w.channels;
  const int64_t n = w.batch * w.in_h * w.in_w * w.channels;
  PS_GRID_STRIDE_LOOP(i, n) {
    const Coordinates at = InputAt(w, i);
    const int64_t b = at.b, ih = at.h, iw = at.w, c = at.c;
    int64_t oh0, oh1, ow0, ow1;
    Covering(ih, w.pad_top, w.k_h, w.stride_h, w.out_h, &oh0, &oh1);
    Covering(iw, w.pad_left, w.k_w, w.stride_w, w.out_w, &ow0, &ow1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      const int64_t kh = ih + w.pad_top - oh * w.stride_h;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t kw = iw + w.pad_left - ow * w.stride_w;
        sum += cols[((b * w.out_h + oh) * w.out_w + ow) * depth +
                    (kh * w.k_w + kw) * w.channels + c];
      }
    }
    dx[i] = sum;
  }
}

__global__ void MaxPoolForwardKernel(Window w, const float* x, float* y, float* argmax) {
  const int64_t n = w.batch * w.out_h * w.out_w * w.channels;
  PS_GRID_STRIDE_LOOP(i, n) {
    const Coordinates at = OutputAt(w, i);
    const int64_t b = at.b, oh = at.h, ow = at.w, c = at.c;
    float best = -INFINITY;
    float best_index = 0.0f;
    for (int64_t kh = 0; kh < w.k_h; ++kh) {
      const int64_t ih = oh * w.stride_h + kh - w.pad_top;
      if (ih < 0 || ih >= w.in_h) continue;
      for (int64_t kw = 0; kw < w.k_w; ++kw) {
        const int64_t iw = ow * w.stride_w + kw - w.pad_left;
        if (iw < 0 || iw >= w.in_w) continue;
        const float v = x[((b * w.in_h + ih) * w.in_w + iw) * w.channels + c];
        if (v > best) {
          best = v;
          best_index = static_cast<float>(kh * w.k_w + kw);
        }
      }
    }
    y[i] = best;
    argmax[i] = best_index;
  }
}

__global__ void MaxPoolBackwardKernel(Window w, const float* dy, const float* argmax,
                                      float* dx) {
  const int64_t n = w.batch * w.in_h * w.in_w * w.channels;
  PS_GRID_STRIDE_LOOP(i, n) {
    const Coordinates at = InputAt(w, i);
    const int64_t b = at.b, ih = at.h, iw = at.w, c = at.c;
    int64_t oh0, oh1, ow0, ow1;
    Covering(ih, w.pad_top, w.k_h, w.stride_h, w.out_h, &oh0, &oh1);
    Covering(iw, w.pad_left, w.k_w, w.stride_w, w.out_w, &ow0, &ow1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      const int64_t kh = ih + w.pad_top - oh * w.stride_h;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t kw = iw + w.pad_left - ow * w.stride_w;
        const int64_t o = ((b * w.out_h + oh) * w.out_w + ow) * w.channels + c;
        if (static_cast<int64_t>(argmax[o]) == kh * w.k_w + kw) sum += dy[o];
      }
    }
    dx[i] = sum;
  }
}

// The number of input elements (padding cut off) the window at (oh, ow) covers.
__device__ __forceinline__ int64_t WindowCount(const Window& w, int64_t oh, int64_t ow) {
  const int64_t h = oh * w.stride_h - w.pad_top;
  const int64_t v = ow * w.stride_w - w.pad_left;
  const int64_t h0 = h > 0 ? h : 0, h1 = h + w.k_h < w.in_h ? h + w.k_h : w.in_h;
  const int64_t w0 = v > 0 ? v : 0, w1 = v + w.k_w < w.in_w ? v + w.k_w : w.in_w;
  return (h1 - h0) * (w1 - w0);
}

__global__ void AvgPoolForwardKernel(Window w, const float* x, float* y) {
  const int64_t n = w.batch * w.out_h * w.out_w * w.channels;
  PS_GRID_STRIDE_LOOP(i, n) {
    const Coordinates at = OutputAt(w, i);
    const int64_t b = at.b, oh = at.h, ow = at.w, c = at.c;
    float sum = 0.0f;
    for (int64_t kh = 0; kh < w.k_h; ++kh) {
      const int64_t ih = oh * w.stride_h + kh - w.pad_top;
      if (ih < 0 || ih >= w.in_h) continue;
      for (int64_t kw = 0; kw < w.k_w; ++kw) {
        const int64_t iw = ow * w.stride_w + kw - w.pad_left;
        if (iw < 0 || iw >= w.in_w) continue;
        sum += x[((b * w.in_h + ih) * w.in_w + iw) * w.channels + c];
      }
    }
    y[i] = sum * (1.0f / static_cast<float>(WindowCount(w, oh, ow)));
  }
}

__global__ void AvgPoolBackwardKernel(Window w, const float* dy, float* dx) {
  const int64_t n = w.batch * w.in_h * w.in_w * w.channels;
  PS_GRID_STRIDE_LOOP(i, n) {
    const Coordinates at = InputAt(w, i);
    const int64_t b = at.b, ih = at.h, iw = at.w, c = at.c;
    int64_t oh0, oh1, ow0, ow1;
    Covering(ih, w.pad_top, w.k_h, w.stride_h, w.out_h, &oh0, &oh1);
    Covering(iw, w.pad_left, w.k_w, w.stride_w, w.out_w, &ow0, &ow1);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const float inv = 1.0f / static_cast<float>(WindowCount(w, oh, ow));
        sum += dy[((b * w.out_h + oh) * w.out_w + ow) * w.channels + c] * inv;
      }
    }
    dx[i] = sum;
  }
}

__global__ void MeanOverPositionsKernel(int64_t batch, int64_t positions, int64_t channels,
                                        const float* x, float* y) {
  const float inv = 1.0f / static_cast<float>(positions);
  PS_GRID_STRIDE_LOOP(i, batch * channels) {
    const int64_t b = i / channels;
    const int64_t c = i % channels;
    float sum = 0.0f;
    for (int64_t p = 0; p < positions; ++p) sum += x[(b * positions + p) * channels + c];
    y[i] = sum * inv;
  }
}

__global__ void MeanOverPositionsBackwardKernel(int64_t batch, int64_t positions,
                                                int64_t channels, const float* dy, float* dx) {
  const float inv = 1.0f / static_cast<float>(positions);
  PS_GRID_STRIDE_LOOP(i, batch * positions * channels) {
    const int64_t c = i % channels;
    const int64_t b = i / (positions * channels);
    dx[i] = dy[b * channels + c] * inv;
  }
}

// --- Batch normalization: one block per column for the sums (double, as the CPU) -------

__global__ void ColumnMomentsKernel(int64_t rows, int64_t cols, const float* x, float* mean,
                                    float* var) {
  __shared__ double scratch[32];
  for (int64_t c = blockIdx.x; c < cols; c += gridDim.x) {
    double sum = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) sum += x[r * cols + c];
    const double m = BlockReduce(sum, SumOp(), scratch) / static_cast<double>(rows);
    double sq = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      const double d = x[r * cols + c] - m;
      sq += d * d;
    }
    sq = BlockReduce(sq, SumOp(), scratch);
    if (threadIdx.x == 0) {
      mean[c] = static_cast<float>(m);
      var[c] = static_cast<float>(sq / static_cast<double>(rows));
    }
  }
}

__global__ void BatchNormForwardKernel(int64_t rows, int64_t cols, const float* x,
                                       const float* mean, const float* var, const float* gamma,
                                       const float* beta, float epsilon, float* y) {
  PS_GRID_STRIDE_LOOP(i, rows * cols) {
    const int64_t c = i % cols;
    const float a = (gamma ? gamma[c] : 1.0f) * (1.0f / sqrtf(var[c] + epsilon));
    const float s = (beta ? beta[c] : 0.0f) - mean[c] * a;
    y[i] = x[i] * a + s;
  }
}

__global__ void BatchNormSumsKernel(int64_t rows, int64_t cols, const float* x, const float* dy,
                                    const float* mean, const float* var, float epsilon,
                                    float* dgamma, float* dbeta) {
  __shared__ double scratch[32];
  for (int64_t c = blockIdx.x; c < cols; c += gridDim.x) {
    const float invstd = 1.0f / sqrtf(var[c] + epsilon);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      const float g = dy[r * cols + c];
      sum_dy += g;
      sum_dy_xhat += g * ((x[r * cols + c] - mean[c]) * invstd);
    }
    sum_dy = BlockReduce(sum_dy, SumOp(), scratch);
    sum_dy_xhat = BlockReduce(sum_dy_xhat, SumOp(), scratch);
    if (threadIdx.x == 0) {
      dbeta[c] = static_cast<float>(sum_dy);
      dgamma[c] = static_cast<float>(sum_dy_xhat);
    }
  }
}

__global__ void BatchNormInputGradKernel(int64_t rows, int64_t cols, const float* x,
                                         const float* dy, const float* mean, const float* var,
                                         const float* gamma, float epsilon, const float* dgamma,
                                         const float* dbeta, float* dx) {
  const float n = static_cast<float>(rows);
  PS_GRID_STRIDE_LOOP(i, rows * cols) {
    const int64_t c = i % cols;
    const float invstd = 1.0f / sqrtf(var[c] + epsilon);
    const float xhat = (x[i] - mean[c]) * invstd;
    const float k = (gamma ? gamma[c] : 1.0f) * invstd / n;
    dx[i] = k * (n * dy[i] - dbeta[c] - xhat * dgamma[c]);
  }
}

// --- Embedding -------------------------------------------------------------------------

__global__ void GatherRowsKernel(int64_t n, int64_t dim, const float* ids, const float* table,
                                 float* out) {
  PS_GRID_STRIDE_LOOP(i, n * dim) {
    const int64_t row = static_cast<int64_t>(ids[i / dim]);
    out[i] = table[row * dim + i % dim];
  }
}

__global__ void ScatterAddRowsKernel(int64_t n, int64_t dim, const float* ids, const float* dy,
                                     float* dtable) {
  PS_GRID_STRIDE_LOOP(i, n * dim) {
    const int64_t row = static_cast<int64_t>(ids[i / dim]);
    atomicAdd(dtable + row * dim + i % dim, dy[i]);
  }
}

#undef PS_GRID_STRIDE_LOOP

}  // namespace

cudaError_t AddBias(cudaStream_t stream, int64_t rows, int64_t cols, const float* bias,
                    float* x) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  AddBiasKernel<<<ElementwiseBlocks(rows * cols), kThreads, 0, stream>>>(rows, cols, bias, x);
  return cudaGetLastError();
}

cudaError_t ColumnSums(cudaStream_t stream, int64_t rows, int64_t cols, const float* x,
                       float* out) {
  if (cols <= 0) return cudaSuccess;
  // rows == 0 still writes zeros (the kernel's loop over rows is empty).
  const int64_t tiles = (cols + kColTileX - 1) / kColTileX;
  const int blocks = static_cast<int>(tiles < kMaxBlocks ? tiles : kMaxBlocks);
  ColumnSumsKernel<<<blocks, dim3(kColTileX, kColTileY), 0, stream>>>(
      rows < 0 ? 0 : rows, cols, x, out);
  return cudaGetLastError();
}

cudaError_t Fill(cudaStream_t stream, int64_t n, float value, float* x) {
  if (n <= 0) return cudaSuccess;
  FillKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(n, value, x);
  return cudaGetLastError();
}

cudaError_t ActivationForward(cudaStream_t stream, int activation, int64_t rows, int64_t cols,
                              const float* x, float* y) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (activation == kSoftmax) {
    SoftmaxForwardKernel<<<RowBlocks(rows), RowThreads(cols), 0, stream>>>(rows, cols, x, y);
  } else {
    if (activation == kLinear && x == y) return cudaSuccess;
    const int64_t n = rows * cols;
    ElementwiseForwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(activation, n, x,
                                                                           y);
  }
  return cudaGetLastError();
}

cudaError_t ActivationBackward(cudaStream_t stream, int activation, int64_t rows,
                               int64_t cols, const float* y, const float* dy, float* dx) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (activation == kSoftmax) {
    SoftmaxBackwardKernel<<<RowBlocks(rows), RowThreads(cols), 0, stream>>>(rows, cols, y, dy,
                                                                            dx);
  } else {
    if (activation == kLinear && dx == dy) return cudaSuccess;
    const int64_t n = rows * cols;
    ElementwiseBackwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(activation, n, y,
                                                                            dy, dx);
  }
  return cudaGetLastError();
}

cudaError_t LossForwardBackward(cudaStream_t stream, int loss_kind, int64_t rows,
                                int64_t cols, const float* pred, const float* target,
                                float grad_scale, float* loss_rows, float* grad) {
  if (rows <= 0) return cudaSuccess;
  LossKernel<<<RowBlocks(rows), RowThreads(cols), 0, stream>>>(
      loss_kind, rows, cols, pred, target, grad_scale, loss_rows, grad);
  return cudaGetLastError();
}

cudaError_t DropoutForward(cudaStream_t stream, int64_t size, float rate, uint64_t seed,
                           const float* x, float* mask, float* y) {
  if (size <= 0) return cudaSuccess;
  // Computed once on the host, as the CPU loop does, so both scale by the same float.
  const float keep_scale = 1.0f / (1.0f - rate);
  DropoutKernel<<<ElementwiseBlocks(size), kThreads, 0, stream>>>(size, rate, keep_scale, seed,
                                                                 x, mask, y);
  return cudaGetLastError();
}

cudaError_t DropoutUniformDraws(cudaStream_t stream, uint64_t seed, uint64_t first,
                                int64_t n, float* out) {
  if (n <= 0) return cudaSuccess;
  DropoutDrawsKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(seed, first, n, out);
  return cudaGetLastError();
}

cudaError_t Multiply(cudaStream_t stream, int64_t size, const float* a, const float* b,
                     float* out) {
  if (size <= 0) return cudaSuccess;
  MultiplyKernel<<<ElementwiseBlocks(size), kThreads, 0, stream>>>(size, a, b, out);
  return cudaGetLastError();
}

cudaError_t Axpy(cudaStream_t stream, int64_t size, float alpha, const float* x, float* y) {
  if (size <= 0) return cudaSuccess;
  AxpyKernel<<<ElementwiseBlocks(size), kThreads, 0, stream>>>(size, alpha, x, y);
  return cudaGetLastError();
}

cudaError_t Scale(cudaStream_t stream, int64_t size, float alpha, float* x) {
  if (size <= 0) return cudaSuccess;
  ScaleKernel<<<ElementwiseBlocks(size), kThreads, 0, stream>>>(size, alpha, x);
  return cudaGetLastError();
}

cudaError_t CountCorrect(cudaStream_t stream, int accuracy_kind, int64_t rows, int64_t cols,
                         const float* pred, const float* target, float threshold,
                         float* correct) {
  if (rows <= 0) return cudaSuccess;
  CountCorrectKernel<<<ElementwiseBlocks(rows), kThreads, 0, stream>>>(
      accuracy_kind, rows, cols, pred, target, threshold, correct);
  return cudaGetLastError();
}

cudaError_t Copy(cudaStream_t stream, int64_t size, const float* x, float* y) {
  if (size <= 0 || x == y) return cudaSuccess;
  return cudaMemcpyAsync(y, x, static_cast<size_t>(size) * sizeof(float),
                         cudaMemcpyDeviceToDevice, stream);
}

cudaError_t Im2Col(cudaStream_t stream, const Window& w, const float* x, float* cols) {
  const int64_t n = w.batch * w.out_h * w.out_w * w.k_h * w.k_w * w.channels;
  if (n <= 0) return cudaSuccess;
  Im2ColKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(w, x, cols);
  return cudaGetLastError();
}

cudaError_t Col2Im(cudaStream_t stream, const Window& w, const float* cols, float* dx) {
  const int64_t n = w.batch * w.in_h * w.in_w * w.channels;
  if (n <= 0) return cudaSuccess;
  Col2ImKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(w, cols, dx);
  return cudaGetLastError();
}

cudaError_t MaxPoolForward(cudaStream_t stream, const Window& w, const float* x, float* y,
                           float* argmax) {
  const int64_t n = w.batch * w.out_h * w.out_w * w.channels;
  if (n <= 0) return cudaSuccess;
  MaxPoolForwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(w, x, y, argmax);
  return cudaGetLastError();
}

cudaError_t MaxPoolBackward(cudaStream_t stream, const Window& w, const float* dy,
                            const float* argmax, float* dx) {
  const int64_t n = w.batch * w.in_h * w.in_w * w.channels;
  if (n <= 0) return cudaSuccess;
  MaxPoolBackwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(w, dy, argmax, dx);
  return cudaGetLastError();
}

cudaError_t AvgPoolForward(cudaStream_t stream, const Window& w, const float* x, float* y) {
  const int64_t n = w.batch * w.out_h * w.out_w * w.channels;
  if (n <= 0) return cudaSuccess;
  AvgPoolForwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(w, x, y);
  return cudaGetLastError();
}

cudaError_t AvgPoolBackward(cudaStream_t stream, const Window& w, const float* dy, float* dx) {
  const int64_t n = w.batch * w.in_h * w.in_w * w.channels;
  if (n <= 0) return cudaSuccess;
  AvgPoolBackwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(w, dy, dx);
  return cudaGetLastError();
}

cudaError_t MeanOverPositions(cudaStream_t stream, int64_t batch, int64_t positions,
                              int64_t channels, const float* x, float* y) {
  if (batch <= 0 || channels <= 0 || positions <= 0) return cudaSuccess;
  MeanOverPositionsKernel<<<ElementwiseBlocks(batch * channels), kThreads, 0, stream>>>(
      batch, positions, channels, x, y);
  return cudaGetLastError();
}

cudaError_t MeanOverPositionsBackward(cudaStream_t stream, int64_t batch, int64_t positions,
                                      int64_t channels, const float* dy, float* dx) {
  const int64_t n = batch * positions * channels;
  if (n <= 0) return cudaSuccess;
  MeanOverPositionsBackwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(
      batch, positions, channels, dy, dx);
  return cudaGetLastError();
}

cudaError_t ColumnMoments(cudaStream_t stream, int64_t rows, int64_t cols, const float* x,
                          float* mean, float* var) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  ColumnMomentsKernel<<<RowBlocks(cols), kThreads, 0, stream>>>(rows, cols, x, mean, var);
  return cudaGetLastError();
}

cudaError_t BatchNormForward(cudaStream_t stream, int64_t rows, int64_t cols, const float* x,
                             const float* mean, const float* var, const float* gamma,
                             const float* beta, float epsilon, float* y) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  BatchNormForwardKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(
      rows, cols, x, mean, var, gamma, beta, epsilon, y);
  return cudaGetLastError();
}

cudaError_t BatchNormBackward(cudaStream_t stream, int64_t rows, int64_t cols, const float* x,
                              const float* dy, const float* mean, const float* var,
                              const float* gamma, float epsilon, float* dgamma, float* dbeta,
                              float* dx) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  BatchNormSumsKernel<<<RowBlocks(cols), kThreads, 0, stream>>>(rows, cols, x, dy, mean, var,
                                                                epsilon, dgamma, dbeta);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || dx == nullptr) return err;
  BatchNormInputGradKernel<<<ElementwiseBlocks(rows * cols), kThreads, 0, stream>>>(
      rows, cols, x, dy, mean, var, gamma, epsilon, dgamma, dbeta, dx);
  return cudaGetLastError();
}

cudaError_t GatherRows(cudaStream_t stream, int64_t n, int64_t dim, const float* ids,
                       const float* table, float* out) {
  if (n <= 0 || dim <= 0) return cudaSuccess;
  GatherRowsKernel<<<ElementwiseBlocks(n * dim), kThreads, 0, stream>>>(n, dim, ids, table,
                                                                        out);
  return cudaGetLastError();
}

cudaError_t ScatterAddRows(cudaStream_t stream, int64_t n, int64_t dim, int64_t vocab,
                           const float* ids, const float* dy, float* dtable) {
  if (vocab * dim > 0) {
    FillKernel<<<ElementwiseBlocks(vocab * dim), kThreads, 0, stream>>>(vocab * dim, 0.0f,
                                                                        dtable);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  if (n <= 0 || dim <= 0) return cudaSuccess;
  ScatterAddRowsKernel<<<ElementwiseBlocks(n * dim), kThreads, 0, stream>>>(n, dim, ids, dy,
                                                                            dtable);
  return cudaGetLastError();
}

}  // namespace cuda_kernels
}  // namespace pstrain
