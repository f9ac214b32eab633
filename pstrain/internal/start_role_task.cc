#include "pstrain/internal/start_role_task.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "pstrain/internal/chief_task.h"
#include "pstrain/internal/ps_task.h"
#include "pstrain/internal/task_security.h"
#include "pstrain/internal/worker_task.h"

namespace pstrain::distribute::internal {

absl::StatusOr<std::unique_ptr<RoleTask>> StartRoleTask(const StrategyOptions& options,
                                                        TfConfig config) {
  for (Role role : {Role::kChief, Role::kPs, Role::kWorker}) {
    if (config.cluster.num_tasks(role) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: parameter_server needs a chief, at least one ps and one worker; the "
          "cluster has no ", RoleName(role)));
    }
  }
  const Role role = config.task.type;
  if (role != Role::kChief && role != Role::kPs && role != Role::kWorker) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG: parameter_server runs on chief, ps and worker tasks, not ",
        TaskIdToString(config.task)));
  }
  SetLogTag(absl::StrCat(RoleName(role), config.task.index));
  // The job's token or certificates before any channel is made: the ps and worker clients
  // the task makes send them, and its server checks them.
  PS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      SecureTask(options, config));
  switch (role) {
    case Role::kChief:
      return ChiefTask::Start(options, std::move(config), std::move(credentials));
    case Role::kWorker:
      return WorkerTask::Start(options, std::move(config), std::move(credentials));
    case Role::kPs:
      return PsTask::Start(options, std::move(config), std::move(credentials));
    default:
      break;
  }
  return absl::InternalError("unreachable: the role was checked above");
}

}  // namespace pstrain::distribute::internal
