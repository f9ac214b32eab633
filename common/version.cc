#include "common/version.h"

#include <cblas.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

std::string BuildConfiguration() {
#ifdef PSTRAIN_WITH_CUDA
  const char* device = "CUDA (cuBLAS) and CPU";
#else
  const char* device = "CPU only (built without CUDA)";
#endif
#if defined(__OPTIMIZE__) && defined(NDEBUG)
  const char* mode = "optimized";
#elif defined(__OPTIMIZE__)
  const char* mode = "optimized, with assertions (no NDEBUG)";
#else
  const char* mode = "debug (not optimized)";
#endif
  return absl::StrCat(device, ", ", mode);
}

std::string VersionText(absl::string_view binary) {
  // openblas_get_config() is the library actually loaded ("OpenBLAS 0.3.21 DYNAMIC_ARCH
  // NO_AFFINITY Haswell MAX_THREADS=64"), which may differ from the headers' version.
  const char* openblas = openblas_get_config();
  return absl::StrCat(binary, " (pstrain ", kPstrainVersion, ")\n",
                      "build: ", BuildConfiguration(), "\n",
                      "gRPC ", grpc::Version(), ", protobuf ",
                      google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION), ", ",
                      openblas != nullptr ? absl::StripAsciiWhitespace(openblas) : "OpenBLAS",
                      "\n");
}

}  // namespace pstrain
