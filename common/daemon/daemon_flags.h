#ifndef PSTRAIN_COMMON_DAEMON_DAEMON_FLAGS_H_
#define PSTRAIN_COMMON_DAEMON_DAEMON_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "common/daemon/daemon_options.h"

namespace pstrain {

// Which tasks a binary runs, for DaemonOptionsFromFlags.
struct TaskTypes {
  // The roles this binary serves (kPs; kChief and kWorker for train). A TF_CONFIG
  // "master" is a kChief.
  std::vector<Role> roles;
  // true: the binary also runs with no cluster at all (train's one-process strategies):
  // without --cluster, --tf_config and TF_CONFIG the options have an empty cluster.
  bool cluster_optional = false;
};

// Builds DaemonOptions from the flags every daemon shares (--tf_config, --cluster,
// --task_type, --task_index, --bind, --rpc_timeout, --shutdown_grace, ...). The cluster
// comes from --cluster/--task_type/--task_index when --cluster is set, else from
// --tf_config, else from the TF_CONFIG environment variable.
// Errors: INVALID_ARGUMENT / NOT_FOUND with a one-line message for the user (a malformed
//         or missing TF_CONFIG, a task type this binary does not run, a negative duration).
absl::StatusOr<DaemonOptions> DaemonOptionsFromFlags(const TaskTypes& expected);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_DAEMON_FLAGS_H_
