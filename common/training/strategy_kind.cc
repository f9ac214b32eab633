#include "common/training/strategy_kind.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

constexpr StrategyKind kAllKinds[] = {StrategyKind::kDefault, StrategyKind::kMirrored,
                                      StrategyKind::kMultiWorkerMirrored,
                                      StrategyKind::kParameterServer};

}  // namespace

absl::string_view StrategyKindName(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kDefault:
      return "default";
    case StrategyKind::kMirrored:
      return "mirrored";
    case StrategyKind::kMultiWorkerMirrored:
      return "multi_worker_mirrored";
    case StrategyKind::kParameterServer:
      return "parameter_server";
  }
  return "unknown";
}

absl::StatusOr<StrategyKind> ParseStrategyKind(absl::string_view name) {
  for (StrategyKind kind : kAllKinds) {
    if (name == StrategyKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("strategy \"", name,
                   "\" is not one of default, mirrored, multi_worker_mirrored, "
                   "parameter_server"));
}

}  // namespace pstrain
