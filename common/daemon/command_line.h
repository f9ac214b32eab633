#ifndef PSTRAIN_COMMON_DAEMON_COMMAND_LINE_H_
#define PSTRAIN_COMMON_DAEMON_COMMAND_LINE_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace pstrain {

// Parses pstrain's flags with Abseil, the same way in every binary:
// - --help lists the flags the binary takes (Abseil's default shows only flags defined in a
//   file named like the binary, and ours live in libraries such as
//   common/daemon/daemon_flags.cc); Abseil's own flags stay under --helpfull.
// - --help, --helpfull, --helpshort, --helpmatch=S and --version print to stdout and exit 0
//   (Abseil exits 1 after help); --version prints VersionText (common/version.h).
// - An unknown or malformed flag is one line on stderr and exit 1 (Abseil's parser).
// Returns the positional arguments, argv[0] first.
std::vector<char*> ParseCommandLineWithUsage(int argc, char** argv, absl::string_view usage);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_COMMAND_LINE_H_
