#ifndef PSTRAIN_COMMON_PARALLEL_H_
#define PSTRAIN_COMMON_PARALLEL_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"

namespace pstrain {

// Runs every task concurrently (one on the calling thread, the others on their own
// threads) and waits for all of them. Returns the first non-OK status in task order, so
// an error names the same peer whichever thread finished first.
absl::Status RunConcurrently(const std::vector<std::function<absl::Status()>>& tasks);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_PARALLEL_H_
