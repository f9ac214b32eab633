#ifndef PSTRAIN_COMMON_TRAINING_STRATEGY_KIND_H_
#define PSTRAIN_COMMON_TRAINING_STRATEGY_KIND_H_

// Which tf.distribute strategy a job trains under, parsed once where the name comes in
// (train's --strategy, the job spec's "strategy", pstrain's StrategyOptions) so that no
// code past that edge compares strings. The strategy core makes the strategy of a kind in
// one place (distribute/create_sync_strategy.h; pstrain/create_strategy.h for the library).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

enum class StrategyKind {
  kDefault,              // "default": one replica in this process
  kMirrored,             // "mirrored": local replicas in lockstep
  kMultiWorkerMirrored,  // "multi_worker_mirrored": one replica per worker, all-reduce
  kParameterServer,      // "parameter_server": variables on ps tasks, asynchronous workers
};

// The kind's name as users write it: "default", "mirrored", "multi_worker_mirrored",
// "parameter_server".
absl::string_view StrategyKindName(StrategyKind kind);

// Errors: INVALID_ARGUMENT, one line: `strategy "NAME" is not one of default, mirrored,
// multi_worker_mirrored, parameter_server`.
absl::StatusOr<StrategyKind> ParseStrategyKind(absl::string_view name);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRAINING_STRATEGY_KIND_H_
