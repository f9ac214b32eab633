#include "pstrain/create_strategy.h"

#include <utility>

#include "common/status_macros.h"
#include "pstrain/internal/parameter_server_strategy.h"
#include "pstrain/internal/sync_strategy.h"

namespace pstrain::distribute {

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyOptions& options) {
  if (options.strategy == StrategyKind::kParameterServer) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<internal::ParameterServerStrategy> ps,
                        internal::ParameterServerStrategy::Create(options));
    return std::unique_ptr<Strategy>(std::move(ps));
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<internal::SyncStrategy> sync,
                      internal::SyncStrategy::Create(options));
  return std::unique_ptr<Strategy>(std::move(sync));
}

}  // namespace pstrain::distribute
