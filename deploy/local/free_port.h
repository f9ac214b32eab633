#ifndef PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_
#define PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_

#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// `count` distinct TCP ports that were free a moment ago on every address (127.0.0.1 and
// ::1 alike: "localhost" is both, and a Bazel server may hold a port on ::1 only); all are bound at
// once (so none repeats) and released before returning. Another process may still take
// one in between, as with any such scheme; callers pass them on at once.
// Errors: UNAVAILABLE when the kernel gives no port.
absl::StatusOr<std::vector<int>> PickFreePorts(int count);

}  // namespace pstrain

#endif  // PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_
