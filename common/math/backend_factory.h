#ifndef PSTRAIN_COMMON_MATH_BACKEND_FACTORY_H_
#define PSTRAIN_COMMON_MATH_BACKEND_FACTORY_H_

// Chooses the math Backend from a --device flag value at run time. This is the only way
// code that must also build without CUDA reaches the CUDA backend: in a plain build (no
// --config=cuda) it links no CUDA library and reports CUDA as unavailable.
//
// Thread-safe (holds no state).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/math/backend.h"

namespace pstrain {

// `device` is one of:
//   "cpu"     the CPU backend;
//   "auto"    CUDA device 0 when this binary was built with CUDA and a device answers,
//             else the CPU (TensorFlow's default-strategy fallback);
//   "cuda"    CUDA device 0; "cuda:N" CUDA device N.
// `note` (may be null) is cleared, and set to one line explaining why when "auto" falls back
// to the CPU (e.g. "no CUDA device answered (cudaGetDeviceCount: error 35
// (cudaErrorInsufficientDriver)); using the CPU"), for the caller to log.
// Errors: INVALID_ARGUMENT for any other string (the message lists the accepted forms);
// FAILED_PRECONDITION for "cuda"/"cuda:N" when the binary has no CUDA support, no device
// answers, or device N does not exist; INTERNAL when the CUDA backend cannot be set up.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(absl::string_view device,
                                                       std::string* note);

// The number of CUDA devices that answer; 0 when none does or the binary has no CUDA
// support.
int CudaDeviceCount();

// True when this binary was built with --config=cuda.
bool BuiltWithCuda();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MATH_BACKEND_FACTORY_H_
