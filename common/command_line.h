#ifndef PSTRAIN_COMMON_COMMAND_LINE_H_
#define PSTRAIN_COMMON_COMMAND_LINE_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace pstrain {

// Parses pstrain's flags with Abseil, so that --help lists the flags a binary takes:
// Abseil's default shows only flags defined in a file named like the binary, and ours
// live in shared libraries (common/daemon_flags.cc). Abseil's own flags stay under
// --helpfull. Returns the positional arguments, argv[0] first.
std::vector<char*> ParseCommandLineWithUsage(int argc, char** argv, absl::string_view usage);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_COMMAND_LINE_H_
