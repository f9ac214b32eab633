#ifndef PSTRAIN_COMMON_MATH_BACKEND_H_
#define PSTRAIN_COMMON_MATH_BACKEND_H_

// The math a model needs, behind one interface, so model code never calls BLAS or CUDA
// directly and a CUDA implementation can be chosen at run time.
//
// Memory model: every pointer passed to a compute method lives in the backend's memory
// space (host memory for the CPU backend, device memory for CUDA). Memory is obtained with
// Allocate() and moved with CopyToDevice()/CopyToHost(). A backend whose memory is host
// memory says so with IsHostMemory(); callers may then pass host pointers directly and
// skip the copies (the CPU fast path).
//
// Compute methods do not validate their arguments (the caller, e.g. Model, validated
// shapes once) and return nothing: a device backend may run them asynchronously and
// report failures from the next Copy*/Synchronize call, which is how CUDA behaves.
// All matrices are row-major and densely packed. Sizes are element counts.
//
// Thread-safety: a Backend instance is used by one thread at a time (one per worker
// thread, like Model).

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {

class Backend;

// An owning handle to `size` floats of backend memory. Move-only; frees on destruction.
// The backend must outlive every buffer it allocated.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* backend /* Not owned. */, float* data, int64_t size)
      : backend_(backend), data_(data), size_(size) {}
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() const { return data_; }
  int64_t size() const { return size_; }
  // Frees the memory now; the buffer becomes empty.
  void Reset();

 private:
  Backend* backend_ = nullptr;
  float* data_ = nullptr;
  int64_t size_ = 0;
};

enum class Activation { kLinear, kRelu, kSigmoid, kTanh, kSoftmax };

// Losses computed by Backend::LossForwardBackward. "Probs" kinds take probabilities (the
// output of a softmax/sigmoid layer) and clip them to [1e-7, 1 - 1e-7] like Keras; the
// fused kinds take logits and are numerically stable for any finite input.
enum class LossKind {
  // Fused softmax + sparse categorical cross-entropy; target: [rows] class ids as float.
  kSoftmaxSparseCrossEntropy,
  // Fused softmax + categorical cross-entropy; target: [rows, cols] distributions.
  kSoftmaxCrossEntropy,
  // Sparse CE on probabilities (normalized to sum 1 per row, then clipped, as Keras 3).
  kSparseCrossEntropy,
  // Categorical CE on probabilities (normalized, clipped).
  kCrossEntropy,
  // Mean over the row of (pred - target)^2.
  kMeanSquaredError,
  // Mean over the row of binary CE on probabilities (clipped, Keras's formula).
  kBinaryCrossEntropy,
  // Fused sigmoid + binary CE on logits (stable form max(z,0) - z*t + log1p(exp(-|z|))).
  kSigmoidBinaryCrossEntropy,
};

// Which predictions count as correct, see Backend::CountCorrect.
enum class AccuracyKind {
  kSparseCategorical,  // argmax(pred row) == label (target [rows], ids as float)
  kCategorical,        // argmax(pred row) == argmax(target row)
  kBinary,             // (pred > threshold) == (target > 0.5), cols must be 1
};

// Where a 2-D window (a convolution kernel or a pooling window) sits over a channels_last
// input [batch, in_h, in_w, channels]: output position (oh, ow) covers input rows
// oh * stride_h - pad_top + [0, k_h) and columns ow * stride_w - pad_left + [0, k_w);
// positions outside the input are padding (zeros for a convolution, skipped by pooling).
struct Window2D {
  int64_t batch = 0;
  int64_t in_h = 0, in_w = 0, channels = 0;
  int64_t k_h = 1, k_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t out_h = 0, out_w = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda:0", ...
  virtual std::string name() const = 0;

  // True when backend memory is ordinary host memory (host pointers may be passed to
  // compute methods directly).
  virtual bool IsHostMemory() const = 0;

  // Errors: RESOURCE_EXHAUSTED when the memory cannot be obtained; INVALID_ARGUMENT for a
  // negative size. Contents are unspecified.
  virtual absl::StatusOr<DeviceBuffer> Allocate(int64_t size) = 0;

  // Host <-> backend copies of `size` floats. Errors: INTERNAL on a device failure
  // (including one left by an earlier asynchronous compute call).
  virtual absl::Status CopyToDevice(const float* host, int64_t size, float* device) = 0;
  virtual absl::Status CopyToHost(const float* device, int64_t size, float* host) = 0;

  // Waits for queued work; reports an asynchronous failure. No-op on the CPU.
  virtual absl::Status Synchronize() = 0;

  // C[m,n] = alpha * op(A) * op(B) + beta * C, where op(A) is [m,k] (A is stored [k,m]
  // when trans_a) and op(B) is [k,n] (B stored [n,k] when trans_b). beta == 0 ignores C's
  // old contents (even NaN).
  virtual void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const float* a, const float* b, float beta,
                    float* c) = 0;

  // x[r, :] += bias[:] for every row r of x[rows, cols].
  virtual void AddBias(int64_t rows, int64_t cols, const float* bias, float* x) = 0;

  // out[c] = sum over r of x[r, c] (the bias gradient).
  virtual void ColumnSums(int64_t rows, int64_t cols, const float* x, float* out) = 0;

  // y = f(x) on x[rows, cols]; softmax is per row. In place (y == x) allowed.
  virtual void ActivationForward(Activation f, int64_t rows, int64_t cols, const float* x,
                                 float* y) = 0;

  // dx = dL/dx given y = f(x) (the forward OUTPUT) and dy = dL/dy. In place (dx == dy)
  // allowed. For softmax: dx = y * (dy - sum(dy * y)) per row.
  virtual void ActivationBackward(Activation f, int64_t rows, int64_t cols, const float* y,
                                  const float* dy, float* dx) = 0;

  // For each row: loss_rows[r] = loss of pred row r against its target, and
  // grad[r, :] = grad_scale * d(loss_rows[r]) / d(pred[r, :]). Pass grad_scale = 1/rows
  // for the gradient of the mean loss. `grad` may be null (evaluation only).
  virtual void LossForwardBackward(LossKind kind, int64_t rows, int64_t cols,
                                   const float* pred, const float* target, float grad_scale,
                                   float* loss_rows, float* grad) = 0;

  // Inverted dropout: mask[i] = 0 with probability `rate`, else 1/(1-rate), drawn from
  // (seed, i) by a counter-based hash so that every backend draws the same mask;
  // y = x * mask. In place allowed. rate in [0, 1).
  virtual void DropoutForward(int64_t size, float rate, uint64_t seed, const float* x,
                              float* mask, float* y) = 0;

  // out = a * b elementwise (dropout backward). In place allowed.
  virtual void Multiply(int64_t size, const float* a, const float* b, float* out) = 0;
  // y += alpha * x.
  virtual void Axpy(int64_t size, float alpha, const float* x, float* y) = 0;
  // x *= alpha.
  virtual void Scale(int64_t size, float alpha, float* x) = 0;

  // correct[r] = 1 when row r's prediction is correct by `kind`, else 0. `threshold` is
  // used by kBinary only (0.5 on probabilities, 0 on logits).
  virtual void CountCorrect(AccuracyKind kind, int64_t rows, int64_t cols, const float* pred,
                            const float* target, float threshold, float* correct) = 0;

  // y = x. In place allowed (a no-op).
  virtual void Copy(int64_t size, const float* x, float* y) = 0;

  // --- Convolution and pooling (Window2D above; tensors channels_last) -----------------

  // cols[(b, oh, ow), (kh, kw, c)] = x[b, oh*stride_h + kh - pad_top, ow*stride_w + kw -
  // pad_left, c], zero where that is padding. cols is [batch*out_h*out_w, k_h*k_w*channels],
  // so that cols times a Keras kernel [k_h, k_w, channels, filters] is the convolution.
  virtual void Im2Col(const Window2D& w, const float* x, float* cols) = 0;
  // The adjoint of Im2Col: dx[b, ih, iw, c] = the sum of every cols entry Im2Col copied
  // from x[b, ih, iw, c]. Overwrites dx.
  virtual void Col2Im(const Window2D& w, const float* cols, float* dx) = 0;

  // y[b, oh, ow, c] = max of the window's non-padding elements; argmax[b, oh, ow, c] =
  // kh * k_w + kw of the first maximal one (row-major order), as a float.
  virtual void MaxPoolForward(const Window2D& w, const float* x, float* y, float* argmax) = 0;
  // dx[b, ih, iw, c] = the sum of dy over the windows whose argmax is that element.
  // Overwrites dx.
  virtual void MaxPoolBackward(const Window2D& w, const float* dy, const float* argmax,
                               float* dx) = 0;
  // y = the mean of the window's non-padding elements (padding is not counted).
  virtual void AvgPoolForward(const Window2D& w, const float* x, float* y) = 0;
  // dx[b, ih, iw, c] = the sum over windows covering it of dy / (that window's count).
  // Overwrites dx.
  virtual void AvgPoolBackward(const Window2D& w, const float* dy, float* dx) = 0;

  // Global average pooling of x[batch, positions, channels]: y[b, c] = mean over p of
  // x[b, p, c]; backward dx[b, p, c] = dy[b, c] / positions (overwrites dx).
  virtual void MeanOverPositions(int64_t batch, int64_t positions, int64_t channels,
                                 const float* x, float* y) = 0;
  virtual void MeanOverPositionsBackward(int64_t batch, int64_t positions, int64_t channels,
                                         const float* dy, float* dx) = 0;

  // --- Batch normalization over the rows of x[rows, cols] (cols = channels) -----------

  // mean[c] and the biased variance var[c] of column c (accumulated in double).
  virtual void ColumnMoments(int64_t rows, int64_t cols, const float* x, float* mean,
                             float* var) = 0;
  // y[r, c] = gamma[c] * (x[r, c] - mean[c]) / sqrt(var[c] + epsilon) + beta[c]; a null
  // gamma is 1, a null beta 0. In place allowed.
  virtual void BatchNormForward(int64_t rows, int64_t cols, const float* x, const float* mean,
                                const float* var, const float* gamma, const float* beta,
                                float epsilon, float* y) = 0;
  // Backward of BatchNormForward when mean and var are x's own ColumnMoments (training):
  // dbeta[c] = sum of dy, dgamma[c] = sum of dy * xhat (xhat the normalized x), and, when
  // dx is not null, dx = gamma * invstd / rows * (rows * dy - dbeta - xhat * dgamma).
  // dgamma and dbeta must not be null.
  virtual void BatchNormBackward(int64_t rows, int64_t cols, const float* x, const float* dy,
                                 const float* mean, const float* var, const float* gamma,
                                 float epsilon, float* dgamma, float* dbeta, float* dx) = 0;

  // --- Embedding lookups (ids are integers carried as floats, validated by the caller) --

  // out[i, :] = table[ids[i], :] for i < n, rows of `dim`.
  virtual void GatherRows(int64_t n, int64_t dim, const float* ids, const float* table,
                          float* out) = 0;
  // dtable[vocab, dim] = 0, then dtable[ids[i], :] += dy[i, :] for i < n (duplicate ids
  // sum; the order of a parallel sum may differ between backends).
  virtual void ScatterAddRows(int64_t n, int64_t dim, int64_t vocab, const float* ids,
                              const float* dy, float* dtable) = 0;

 protected:
  friend class DeviceBuffer;
  // Releases memory from Allocate(). Never fails.
  virtual void Free(float* data) = 0;
};

// The dropout mask's uniform draw in [0, 1) for element `index` under `seed`; shared by
// all backends (a CUDA kernel reimplements the same arithmetic).
inline float DropoutUniform(uint64_t seed, uint64_t index) {
  // splitmix64 of a mix of seed and index: cheap, stateless, good enough for masks.
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + index + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z = z ^ (z >> 31);
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MATH_BACKEND_H_
