#ifndef PSTRAIN_COMMON_DAEMON_FLAGS_H_
#define PSTRAIN_COMMON_DAEMON_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/daemon_options.h"

namespace pstrain {

// Builds DaemonOptions from the flags every daemon shares (--tf_config, --cluster,
// --task_type, --task_index, --listen, --rpc_timeout, ...). The cluster comes from
// --cluster/--task_type/--task_index when --cluster is set, else from --tf_config, else
// from the TF_CONFIG environment variable. `expected_type` is the task type this binary
// serves ("ps", "worker" or "chief"); "master" counts as "chief".
// Errors: INVALID_ARGUMENT / NOT_FOUND with a one-line message for the user.
absl::StatusOr<DaemonOptions> DaemonOptionsFromFlags(const std::string& expected_type);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_FLAGS_H_
