#ifndef PSTRAIN_PSTRAIN_CREATE_STRATEGY_H_
#define PSTRAIN_PSTRAIN_CREATE_STRATEGY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "common/training/strategy_kind.h"
#include "distribute/create_sync_strategy.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute {

// Creates the strategy `options` names, for this process's task in the cluster (see the
// table in pstrain/pstrain.h): multi_worker_mirrored starts serving the all-reduce on this
// task's port and agrees on the collective with the others; parameter_server starts this
// task's server (a ps serves the variables; a worker, the scheduled functions; the chief,
// a health service its tasks watch).
// Errors: INVALID_ARGUMENT an unknown strategy, a malformed or missing TF_CONFIG, a task
// the strategy has no use for (a ps under multi_worker_mirrored), bad --devices/--device;
// UNAVAILABLE a port that cannot be bound; FAILED_PRECONDITION the collective asked for is
// not possible.
absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyOptions& options);

// The public Strategy over a synchronous strategy (default, mirrored,
// multi_worker_mirrored; `kind`) that its program made itself with the one factory both
// use (distribute/create_sync_strategy.h): `train`, whose multi_worker_mirrored ring serves
// the all-reduce on its daemon's server beside health and metrics. `setup.strategy` must be
// set; `task` is this process's TF_CONFIG task (a default TaskId without a cluster). The
// strategy owns the setup (its ring and backends) from then on.
std::unique_ptr<Strategy> CreateStrategy(StrategyKind kind, SyncStrategySetup setup, TaskId task);

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_CREATE_STRATEGY_H_
