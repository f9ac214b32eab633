#ifndef PSTRAIN_COMMON_MATH_CUDA_KERNELS_H_
#define PSTRAIN_COMMON_MATH_CUDA_KERNELS_H_

// Host-callable launchers for the CUDA backend's own kernels (everything but Gemm, which
// is cuBLAS). Compiled by nvcc into a static library (see BUILD, genrule cuda_kernels_lib)
// and called from gcc-compiled cuda_backend.cc, so this header uses only the CUDA runtime
// API types and plain C++: no absl, no device code.
//
// Semantics are exactly those of the same-named Backend methods (backend.h); cpu_backend.cc
// is the reference. Every launcher enqueues on `stream` and returns cudaGetLastError() after
// the launch (a launch-configuration error), never waiting for the kernel. Sizes of zero
// launch nothing. Pointers are device memory.
//
// The enum arguments are the integer values of pstrain::Activation / LossKind /
// AccuracyKind (static_asserts in cuda_backend.cc keep them in step), so that the .cu file
// does not need backend.h and its absl includes.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace pstrain {
namespace cuda_kernels {

cudaError_t AddBias(cudaStream_t stream, int64_t rows, int64_t cols, const float* bias,
                    float* x);
cudaError_t ColumnSums(cudaStream_t stream, int64_t rows, int64_t cols, const float* x,
                       float* out);
// Fills `n` floats with zero (Gemm with k == 0 and beta == 0, which must ignore NaN).
cudaError_t Fill(cudaStream_t stream, int64_t n, float value, float* x);
cudaError_t ActivationForward(cudaStream_t stream, int activation, int64_t rows, int64_t cols,
                              const float* x, float* y);
cudaError_t ActivationBackward(cudaStream_t stream, int activation, int64_t rows,
                               int64_t cols, const float* y, const float* dy, float* dx);
// `grad` may be null.
cudaError_t LossForwardBackward(cudaStream_t stream, int loss_kind, int64_t rows,
                                int64_t cols, const float* pred, const float* target,
                                float grad_scale, float* loss_rows, float* grad);
cudaError_t DropoutForward(cudaStream_t stream, int64_t size, float rate, uint64_t seed,
                           const float* x, float* mask, float* y);
cudaError_t Multiply(cudaStream_t stream, int64_t size, const float* a, const float* b,
                     float* out);
cudaError_t Axpy(cudaStream_t stream, int64_t size, float alpha, const float* x, float* y);
cudaError_t Scale(cudaStream_t stream, int64_t size, float alpha, float* x);
cudaError_t CountCorrect(cudaStream_t stream, int accuracy_kind, int64_t rows, int64_t cols,
                         const float* pred, const float* target, float threshold,
                         float* correct);

// Convolution, pooling, normalization and embedding ops (Backend's Window2D fields passed
// one by one, since this header cannot include backend.h).
struct Window {
  int64_t batch, in_h, in_w, channels, k_h, k_w, stride_h, stride_w, pad_top, pad_left,
      out_h, out_w;
};
cudaError_t Copy(cudaStream_t stream, int64_t size, const float* x, float* y);
cudaError_t Im2Col(cudaStream_t stream, const Window& w, const float* x, float* cols);
cudaError_t Col2Im(cudaStream_t stream, const Window& w, const float* cols, float* dx);
cudaError_t MaxPoolForward(cudaStream_t stream, const Window& w, const float* x, float* y,
                           float* argmax);
cudaError_t MaxPoolBackward(cudaStream_t stream, const Window& w, const float* dy,
                            const float* argmax, float* dx);
cudaError_t AvgPoolForward(cudaStream_t stream, const Window& w, const float* x, float* y);
cudaError_t AvgPoolBackward(cudaStream_t stream, const Window& w, const float* dy, float* dx);
cudaError_t MeanOverPositions(cudaStream_t stream, int64_t batch, int64_t positions,
                              int64_t channels, const float* x, float* y);
cudaError_t MeanOverPositionsBackward(cudaStream_t stream, int64_t batch, int64_t positions,
                                      int64_t channels, const float* dy, float* dx);
cudaError_t ColumnMoments(cudaStream_t stream, int64_t rows, int64_t cols, const float* x,
                          float* mean, float* var);
// gamma, beta may be null.
cudaError_t BatchNormForward(cudaStream_t stream, int64_t rows, int64_t cols, const float* x,
                             const float* mean, const float* var, const float* gamma,
                             const float* beta, float epsilon, float* y);
// gamma and dx may be null.
cudaError_t BatchNormBackward(cudaStream_t stream, int64_t rows, int64_t cols, const float* x,
                              const float* dy, const float* mean, const float* var,
                              const float* gamma, float epsilon, float* dgamma, float* dbeta,
                              float* dx);
cudaError_t GatherRows(cudaStream_t stream, int64_t n, int64_t dim, const float* ids,
                       const float* table, float* out);
cudaError_t ScatterAddRows(cudaStream_t stream, int64_t n, int64_t dim, int64_t vocab,
                           const float* ids, const float* dy, float* dtable);

// The dropout draw for (seed, index) computed by the device code, for tests that check it
// against pstrain::DropoutUniform bit for bit. Writes `n` draws for indices
// first .. first+n-1 to `out` (device memory).
cudaError_t DropoutUniformDraws(cudaStream_t stream, uint64_t seed, uint64_t first,
                                int64_t n, float* out);

}  // namespace cuda_kernels
}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MATH_CUDA_KERNELS_H_
