#include "tests/ps_final_status.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace pstrain {

std::map<int, PsStatusResponse> FinalPsStatuses(const std::string& log) {
  std::map<int, PsStatusResponse> statuses;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    const size_t at = line.find("ps task ");
    const size_t json = line.find(" final status: ");
    if (at == absl::string_view::npos || json == absl::string_view::npos || json < at) continue;
    int index = -1;
    EXPECT_TRUE(absl::SimpleAtoi(line.substr(at + 8, json - at - 8), &index)) << line;
    PsStatusResponse status;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        std::string(line.substr(json + 15)), &status);
    EXPECT_TRUE(parsed.ok()) << parsed.ToString() << ": " << line;
    statuses[index] = status;
  }
  return statuses;
}

absl::StatusOr<ChiefStatusResponse> FinalChiefStatus(const std::string& log) {
  constexpr absl::string_view kMark = "chief final status: ";
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    const size_t at = line.find(kMark);
    if (at == absl::string_view::npos) continue;
    ChiefStatusResponse status;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        std::string(line.substr(at + kMark.size())), &status);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(parsed.ToString(), ": ", line));
    }
    return status;
  }
  return absl::NotFoundError("no \"chief final status\" line in the chief's log");
}

}  // namespace pstrain
