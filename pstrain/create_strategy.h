#ifndef PSTRAIN_PSTRAIN_CREATE_STRATEGY_H_
#define PSTRAIN_PSTRAIN_CREATE_STRATEGY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/training/strategy_kind.h"
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

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_CREATE_STRATEGY_H_
