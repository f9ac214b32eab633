#include "common/math/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/math/cuda_kernels.h"

namespace pstrain {
namespace {

// The kernels take the enums as ints (cuda_kernels.h explains why); these keep the numbering
// of backend.h and cuda_kernels.cu in step.
static_assert(static_cast<int>(Activation::kLinear) == 0 &&
                  static_cast<int>(Activation::kRelu) == 1 &&
                  static_cast<int>(Activation::kSigmoid) == 2 &&
                  static_cast<int>(Activation::kTanh) == 3 &&
                  static_cast<int>(Activation::kSoftmax) == 4,
              "Activation values must match cuda_kernels.cu");
static_assert(static_cast<int>(LossKind::kSoftmaxSparseCrossEntropy) == 0 &&
                  static_cast<int>(LossKind::kSoftmaxCrossEntropy) == 1 &&
                  static_cast<int>(LossKind::kSparseCrossEntropy) == 2 &&
                  static_cast<int>(LossKind::kCrossEntropy) == 3 &&
                  static_cast<int>(LossKind::kMeanSquaredError) == 4 &&
                  static_cast<int>(LossKind::kBinaryCrossEntropy) == 5 &&
                  static_cast<int>(LossKind::kSigmoidBinaryCrossEntropy) == 6,
              "LossKind values must match cuda_kernels.cu");
static_assert(static_cast<int>(AccuracyKind::kSparseCategorical) == 0 &&
                  static_cast<int>(AccuracyKind::kCategorical) == 1 &&
                  static_cast<int>(AccuracyKind::kBinary) == 2,
              "AccuracyKind values must match cuda_kernels.cu");

// "error 35 (cudaErrorInsufficientDriver: CUDA driver version is insufficient ...)".
std::string DescribeCudaError(cudaError_t err) {
  return absl::StrCat("error ", static_cast<int>(err), " (", cudaGetErrorName(err), ": ",
                      cudaGetErrorString(err), ")");
}

std::string DescribeCublasStatus(cublasStatus_t status) {
  return absl::StrCat("status ", static_cast<int>(status), " (", cublasGetStatusName(status),
                      ": ", cublasGetStatusString(status), ")");
}

class CudaBackend : public Backend {
 public:
  CudaBackend(int ordinal, cudaStream_t stream, cublasHandle_t cublas)
      : ordinal_(ordinal), name_(absl::StrCat("cuda:", ordinal)), stream_(stream),
        cublas_(cublas) {}

  ~CudaBackend() override {
    // Best effort: the context may already be broken, and a destructor cannot report.
    if (cudaSetDevice(ordinal_) != cudaSuccess) cudaGetLastError();
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    cudaGetLastError();
  }

  std::string name() const override { return name_; }
  bool IsHostMemory() const override { return false; }

  absl::StatusOr<DeviceBuffer> Allocate(int64_t size) override {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": negative allocation size ", size));
    }
    if (size == 0) return DeviceBuffer(this, nullptr, 0);
    if (static_cast<uint64_t>(size) > std::numeric_limits<size_t>::max() / sizeof(float)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name_, ": cannot allocate ", size, " floats"));
    }
    absl::Status status = Activate();
    if (!status.ok()) return Report(std::move(status));
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(size) * sizeof(float));
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it so the next launch check is not confused
      return absl::ResourceExhaustedError(absl::StrCat(
          name_, ": cannot allocate ", size, " floats: ", DescribeCudaError(err)));
    }
    if (err != cudaSuccess) return Report(CudaStatus(err, "cudaMalloc"));
    return DeviceBuffer(this, static_cast<float*>(p), size);
  }

  absl::Status CopyToDevice(const float* host, int64_t size, float* device) override {
    return Copy(device, host, size, cudaMemcpyHostToDevice, "cudaMemcpyAsync (host to device)");
  }

  absl::Status CopyToHost(const float* device, int64_t size, float* host) override {
    return Copy(host, device, size, cudaMemcpyDeviceToHost, "cudaMemcpyAsync (device to host)");
  }

  absl::Status Synchronize() override {
    absl::Status status = Activate();
    if (status.ok()) status = CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return Report(std::move(status));
  }

  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, const float* b, float beta, float* c) override {
    if (m <= 0 || n <= 0 || !ActivateOrRecord()) return;
    if (k <= 0) {
      // As the CPU backend: k == 0 means C = beta * C, and beta == 0 ignores C (even NaN).
      if (beta == 0.0f) {
        Record(cuda_kernels::Fill(stream_, m * n, 0.0f, c), "Fill kernel launch");
      } else {
        Record(cuda_kernels::Scale(stream_, m * n, beta, c), "Scale kernel launch");
      }
      return;
    }
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
      RecordStatus(absl::InvalidArgumentError(
          absl::StrCat(name_, ": Gemm of [", m, ",", k, "] x [", k, ",", n,
                       "] exceeds cuBLAS's 32-bit sizes")));
      return;
    }
    // cuBLAS is column-major; a row-major matrix is its transpose. So compute
    // C^T[n,m] = op(B)^T[n,k] * op(A)^T[k,m]: swap the operands and keep each one's trans
    // flag; leading dimensions are the row-major row lengths.
    const cublasStatus_t status = cublasSgemm(
        cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
        static_cast<int>(trans_b ? k : n), a, static_cast<int>(trans_a ? m : k), &beta, c,
        static_cast<int>(n));
    if (status != CUBLAS_STATUS_SUCCESS) {
      RecordStatus(absl::InternalError(
          absl::StrCat(name_, ": cublasSgemm: ", DescribeCublasStatus(status))));
    }
  }

  void AddBias(int64_t rows, int64_t cols, const float* bias, float* x) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::AddBias(stream_, rows, cols, bias, x), "AddBias kernel launch");
  }

  void ColumnSums(int64_t rows, int64_t cols, const float* x, float* out) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::ColumnSums(stream_, rows, cols, x, out), "ColumnSums kernel launch");
  }

  void ActivationForward(Activation f, int64_t rows, int64_t cols, const float* x,
                         float* y) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::ActivationForward(stream_, static_cast<int>(f), rows, cols, x, y),
           "ActivationForward kernel launch");
  }

  void ActivationBackward(Activation f, int64_t rows, int64_t cols, const float* y,
                          const float* dy, float* dx) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::ActivationBackward(stream_, static_cast<int>(f), rows, cols, y, dy, dx),
           "ActivationBackward kernel launch");
  }

  void LossForwardBackward(LossKind kind, int64_t rows, int64_t cols, const float* pred,
                           const float* target, float grad_scale, float* loss_rows,
                           float* grad) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::LossForwardBackward(stream_, static_cast<int>(kind), rows, cols, pred,
                                             target, grad_scale, loss_rows, grad),
           "LossForwardBackward kernel launch");
  }

  void DropoutForward(int64_t size, float rate, uint64_t seed, const float* x, float* mask,
                      float* y) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::DropoutForward(stream_, size, rate, seed, x, mask, y),
           "DropoutForward kernel launch");
  }

  void Multiply(int64_t size, const float* a, const float* b, float* out) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::Multiply(stream_, size, a, b, out), "Multiply kernel launch");
  }

  void Axpy(int64_t size, float alpha, const float* x, float* y) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::Axpy(stream_, size, alpha, x, y), "Axpy kernel launch");
  }

  void Scale(int64_t size, float alpha, float* x) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::Scale(stream_, size, alpha, x), "Scale kernel launch");
  }

  void CountCorrect(AccuracyKind kind, int64_t rows, int64_t cols, const float* pred,
                    const float* target, float threshold, float* correct) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::CountCorrect(stream_, static_cast<int>(kind), rows, cols, pred, target,
                                      threshold, correct),
           "CountCorrect kernel launch");
  }

  void Copy(int64_t size, const float* x, float* y) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::Copy(stream_, size, x, y), "Copy (device to device)");
  }

  void Im2Col(const Window2D& w, const float* x, float* cols) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::Im2Col(stream_, ToKernel(w), x, cols), "Im2Col kernel launch");
  }

  void Col2Im(const Window2D& w, const float* cols, float* dx) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::Col2Im(stream_, ToKernel(w), cols, dx), "Col2Im kernel launch");
  }

  void MaxPoolForward(const Window2D& w, const float* x, float* y, float* argmax) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::MaxPoolForward(stream_, ToKernel(w), x, y, argmax),
           "MaxPoolForward kernel launch");
  }

  void MaxPoolBackward(const Window2D& w, const float* dy, const float* argmax,
                       float* dx) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::MaxPoolBackward(stream_, ToKernel(w), dy, argmax, dx),
           "MaxPoolBackward kernel launch");
  }

  void AvgPoolForward(const Window2D& w, const float* x, float* y) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::AvgPoolForward(stream_, ToKernel(w), x, y),
           "AvgPoolForward kernel launch");
  }

  void AvgPoolBackward(const Window2D& w, const float* dy, float* dx) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::AvgPoolBackward(stream_, ToKernel(w), dy, dx),
           "AvgPoolBackward kernel launch");
  }

  void MeanOverPositions(int64_t batch, int64_t positions, int64_t channels, const float* x,
                         float* y) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::MeanOverPositions(stream_, batch, positions, channels, x, y),
           "MeanOverPositions kernel launch");
  }

  void MeanOverPositionsBackward(int64_t batch, int64_t positions, int64_t channels,
                                 const float* dy, float* dx) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::MeanOverPositionsBackward(stream_, batch, positions, channels, dy, dx),
           "MeanOverPositionsBackward kernel launch");
  }

  void ColumnMoments(int64_t rows, int64_t cols, const float* x, float* mean,
                     float* var) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::ColumnMoments(stream_, rows, cols, x, mean, var),
           "ColumnMoments kernel launch");
  }

  void BatchNormForward(int64_t rows, int64_t cols, const float* x, const float* mean,
                        const float* var, const float* gamma, const float* beta,
                        float epsilon, float* y) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::BatchNormForward(stream_, rows, cols, x, mean, var, gamma, beta,
                                          epsilon, y),
           "BatchNormForward kernel launch");
  }

  void BatchNormBackward(int64_t rows, int64_t cols, const float* x, const float* dy,
                         const float* mean, const float* var, const float* gamma,
                         float epsilon, float* dgamma, float* dbeta, float* dx) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::BatchNormBackward(stream_, rows, cols, x, dy, mean, var, gamma,
                                           epsilon, dgamma, dbeta, dx),
           "BatchNormBackward kernel launch");
  }

  void GatherRows(int64_t n, int64_t dim, const float* ids, const float* table,
                  float* out) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::GatherRows(stream_, n, dim, ids, table, out), "GatherRows kernel launch");
  }

  void ScatterAddRows(int64_t n, int64_t dim, int64_t vocab, const float* ids, const float* dy,
                      float* dtable) override {
    if (!ActivateOrRecord()) return;
    Record(cuda_kernels::ScatterAddRows(stream_, n, dim, vocab, ids, dy, dtable),
           "ScatterAddRows kernel launch");
  }

 protected:
  void Free(float* data) override {
    // cudaFree may return an error left by earlier asynchronous work; keep it for the next
    // Copy*/Synchronize instead of losing it (Free itself cannot fail).
    if (!ActivateOrRecord()) return;
    Record(cudaFree(data), "cudaFree");
  }

 private:
  static cuda_kernels::Window ToKernel(const Window2D& w) {
    return {w.batch,    w.in_h,     w.in_w,     w.channels, w.k_h,  w.k_w,
            w.stride_h, w.stride_w, w.pad_top, w.pad_left, w.out_h, w.out_w};
  }

  absl::Status CudaStatus(cudaError_t err, const char* what) const {
    if (err == cudaSuccess) return absl::OkStatus();
    // The runtime also keeps the error as its "last error"; clear it so that the next
    // launch's cudaGetLastError() reports that launch, not this call.
    cudaGetLastError();
    return absl::InternalError(absl::StrCat(name_, ": ", what, ": ", DescribeCudaError(err)));
  }

  // The device is per host thread in CUDA; make ours current for whichever thread calls.
  absl::Status Activate() { return CudaStatus(cudaSetDevice(ordinal_), "cudaSetDevice"); }

  bool ActivateOrRecord() {
    absl::Status status = Activate();
    if (status.ok()) return true;
    RecordStatus(std::move(status));
    return false;
  }

  void Record(cudaError_t err, const char* what) {
    if (err != cudaSuccess) RecordStatus(CudaStatus(err, what));
  }

  // Keeps the first failure only: later ones are usually consequences of it.
  void RecordStatus(absl::Status status) {
    if (pending_.ok()) pending_ = std::move(status);
  }

  // The recorded asynchronous failure if any (then forgotten), else `status`.
  absl::Status Report(absl::Status status) {
    if (!pending_.ok()) {
      absl::Status first = std::move(pending_);
      pending_ = absl::OkStatus();
      return first;
    }
    return status;
  }

  absl::Status Copy(void* dst, const void* src, int64_t size, cudaMemcpyKind kind,
                    const char* what) {
    absl::Status status = Activate();
    if (status.ok() && size > 0) {
      status = CudaStatus(cudaMemcpyAsync(dst, src, static_cast<size_t>(size) * sizeof(float),
                                          kind, stream_),
                          what);
    }
    // Wait for the copy (and everything queued before it): the caller may reuse or free
    // its host buffer as soon as we return, and a device->host result must be complete.
    if (status.ok()) {
      status = CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    }
    return Report(std::move(status));
  }

  const int ordinal_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;   // Owned.
  cublasHandle_t cublas_ = nullptr;  // Owned.
  absl::Status pending_;  // first unreported failure of an asynchronous call
};

}  // namespace

absl::StatusOr<int> QueryCudaDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("cudaGetDeviceCount: error ",
                                               static_cast<int>(err), " (",
                                               cudaGetErrorName(err), ")"));
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int ordinal) {
  const std::string name = absl::StrCat("cuda:", ordinal);
  if (ordinal < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": negative device ordinal"));
  }
  const absl::StatusOr<int> count = QueryCudaDeviceCount();
  if (!count.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": no CUDA device answered (", count.status().message(), ")"));
  }
  if (ordinal >= *count) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, ": no such device (", *count, " CUDA device(s) answered)"));
  }
  cudaError_t err = cudaSetDevice(ordinal);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": cudaSetDevice: ", DescribeCudaError(err)));
  }
  cudaStream_t stream = nullptr;
  // Non-blocking: our stream does not serialize with the legacy default stream that other
  // libraries in the process may use.
  err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(
        absl::StrCat(name, ": cudaStreamCreateWithFlags: ", DescribeCudaError(err)));
  }
  cublasHandle_t cublas = nullptr;
  cublasStatus_t status = cublasCreate(&cublas);
  if (status != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    cudaGetLastError();
    return absl::InternalError(
        absl::StrCat(name, ": cublasCreate: ", DescribeCublasStatus(status)));
  }
  // CUBLAS_DEFAULT_MATH keeps full FP32 (no TF32 tensor-core rounding), which the 1e-4
  // agreement with the CPU backend relies on.
  status = cublasSetStream(cublas, stream);
  if (status == CUBLAS_STATUS_SUCCESS) status = cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH);
  if (status != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(cublas);
    cudaStreamDestroy(stream);
    cudaGetLastError();
    return absl::InternalError(
        absl::StrCat(name, ": cublas setup: ", DescribeCublasStatus(status)));
  }
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(ordinal, stream, cublas));
}

}  // namespace pstrain
