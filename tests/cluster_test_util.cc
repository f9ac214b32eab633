#include "tests/cluster_test_util.h"

#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace pstrain {

std::vector<double> ParseEpochLosses(const std::string& output) {
  std::vector<double> losses;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "Epoch ")) continue;
    const size_t at = line.find(" - loss: ");
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(at + 9);
    double loss = 0;
    if (absl::SimpleAtod(rest.substr(0, rest.find(' ')), &loss)) losses.push_back(loss);
  }
  return losses;
}

}  // namespace pstrain
