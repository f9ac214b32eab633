#ifndef PSTRAIN_COMMON_MATH_CPU_BACKEND_H_
#define PSTRAIN_COMMON_MATH_CPU_BACKEND_H_

#include <memory>

#include "common/math/backend.h"

namespace pstrain {

// The host Backend: OpenBLAS sgemm plus plain loops the compiler vectorizes. Its memory is
// host memory (IsHostMemory() is true), so copies are memcpy and callers may skip them.
// Never fails except Allocate on exhaustion.
std::unique_ptr<Backend> CreateCpuBackend();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MATH_CPU_BACKEND_H_
