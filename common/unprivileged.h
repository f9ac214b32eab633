#ifndef PSTRAIN_COMMON_UNPRIVILEGED_H_
#define PSTRAIN_COMMON_UNPRIVILEGED_H_

// For tests of permission errors, which root never gets: runs a function in a child
// process without the capabilities that let root read and write any file.

#include <functional>

namespace pstrain {

// Forks, drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER in the child and
// returns what `body` returned there (0-253), or -1 when the child could not drop them or
// died. Call before the test starts
// threads of its own.
int RunUnprivileged(const std::function<int()>& body);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_UNPRIVILEGED_H_
