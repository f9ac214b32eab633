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
