#ifndef PSTRAIN_PSTRAIN_STRATEGY_FROM_SETUP_H_
#define PSTRAIN_PSTRAIN_STRATEGY_FROM_SETUP_H_

// Not part of the library's API (pstrain/pstrain.h does not include it; only //train may
// depend on it): the public Strategy over a synchronous strategy that a daemon made itself.

#include <memory>

#include "common/cluster_spec.h"
#include "common/training/strategy_kind.h"
#include "distribute/create_sync_strategy.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute {

// The public Strategy over a synchronous strategy (default, mirrored,
// multi_worker_mirrored; `kind`) that its program made with the one factory the library
// uses too (distribute/create_sync_strategy.h): `train`, whose multi_worker_mirrored ring
// serves the all-reduce on its daemon's server beside health and metrics, which
// StrategyOptions cannot express. `setup.strategy` must be set; `task` is this process's
// TF_CONFIG task (a default TaskId without a cluster). The strategy owns the setup (its
// ring and backends) from then on.
std::unique_ptr<Strategy> StrategyFromSetup(StrategyKind kind, SyncStrategySetup setup,
                                            TaskId task);

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_STRATEGY_FROM_SETUP_H_
