#include "pstrain/strategy_from_setup.h"

#include <utility>

#include "pstrain/internal/sync_strategy.h"

namespace pstrain::distribute {

std::unique_ptr<Strategy> StrategyFromSetup(StrategyKind kind, SyncStrategySetup setup,
                                            TaskId task) {
  return internal::SyncStrategy::FromSetup(kind, std::move(setup), std::move(task));
}

}  // namespace pstrain::distribute
