#ifndef PSTRAIN_COMMON_VERSION_H_
#define PSTRAIN_COMMON_VERSION_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pstrain {

// pstrain's version: the one constant that --version, the container image's label and the
// metrics' build info report. Bump it with a release.
inline constexpr char kPstrainVersion[] = "0.1.0";

// How this binary was built, in one line: "CUDA" or "CPU only", and "optimized" (compiled
// with optimization and NDEBUG) or "debug".
std::string BuildConfiguration();

// What --version prints (several lines): "<binary> (pstrain 0.1.0)", the build
// configuration, and the versions of gRPC, protobuf and OpenBLAS this binary runs with.
std::string VersionText(absl::string_view binary);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_VERSION_H_
