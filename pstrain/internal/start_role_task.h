#ifndef PSTRAIN_PSTRAIN_INTERNAL_START_ROLE_TASK_H_
#define PSTRAIN_PSTRAIN_INTERNAL_START_ROLE_TASK_H_

// Starts this process's task of a custom loop under parameter_server: the one place the
// role TF_CONFIG names picks a class (chief_task.h, worker_task.h, ps_task.h).

#include <memory>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "pstrain/internal/role_task.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

// Sets the job's authorization and TLS for this process (task_security.h: every call
// needs the token or a certificate, and the role the method is for: the chief's
// RunFunction and Shutdown, the workers' Push and Pull), then starts the task's class on
// its TF_CONFIG port.
// Errors: INVALID_ARGUMENT a cluster without a chief, a ps or a worker, a task of another
// type (an evaluator), or SecureTask's (no token, certificate or insecure); UNAVAILABLE
// the port cannot be bound.
absl::StatusOr<std::unique_ptr<RoleTask>> StartRoleTask(const StrategyOptions& options,
                                                        TfConfig config);

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_START_ROLE_TASK_H_
