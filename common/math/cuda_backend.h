#ifndef PSTRAIN_COMMON_MATH_CUDA_BACKEND_H_
#define PSTRAIN_COMMON_MATH_CUDA_BACKEND_H_

// The CUDA Backend: cuBLAS sgemm plus the project's kernels (cuda_kernels.cu), all queued on
// one stream per backend. Built only under --config=cuda (the target is incompatible
// otherwise); code that must also build without CUDA goes through backend_factory.h.
//
// Errors: compute methods are asynchronous. The first failure of a launch or of a cuBLAS
// call is recorded and returned (then cleared) by the next CopyToDevice/CopyToHost/
// Synchronize, as INTERNAL (INVALID_ARGUMENT for a Gemm too large for cuBLAS's int sizes).
// A device fault that poisons the CUDA context is reported by every later call, as CUDA
// itself does.
//
// Thread-safety: as Backend, one thread at a time. Each call makes the backend's device
// current on the calling thread, so the thread may change between calls.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/math/backend.h"

namespace pstrain {

// The number of CUDA devices the runtime reports. Errors: UNAVAILABLE when the runtime
// answers with an error (no driver, driver too old: error 35 on machines without a GPU, no
// device: error 100), the message naming the call and error ("cudaGetDeviceCount: error 35
// (cudaErrorInsufficientDriver)"). May return 0 without an error.
absl::StatusOr<int> QueryCudaDeviceCount();

// A backend on device `ordinal`, with its own stream and cuBLAS handle.
// Errors: INVALID_ARGUMENT for a negative ordinal; FAILED_PRECONDITION when the device does
// not exist or does not answer; INTERNAL when the stream or cuBLAS cannot be created.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int ordinal);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MATH_CUDA_BACKEND_H_
