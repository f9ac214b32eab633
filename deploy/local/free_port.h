#ifndef PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_
#define PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_

#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// `count` distinct TCP ports on 127.0.0.1 that were free a moment ago: all are bound at
// once (so none repeats) and released before returning. Another process may still take
// one in between, as with any such scheme; callers pass them on at once.
// Errors: UNAVAILABLE when the kernel gives no port.
absl::StatusOr<std::vector<int>> PickFreePorts(int count);

}  // namespace pstrain

#endif  // PSTRAIN_DEPLOY_LOCAL_FREE_PORT_H_
