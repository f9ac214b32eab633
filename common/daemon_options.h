#ifndef PSTRAIN_COMMON_DAEMON_OPTIONS_H_
#define PSTRAIN_COMMON_DAEMON_OPTIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"

namespace pstrain {

// What every daemon (ps_server, worker, chief) needs to know to join its cluster.
struct DaemonOptions {
  TfConfig config;
  // Where this task listens. Empty: every interface, on the port of its own address in
  // the cluster spec.
  std::string listen_address;
  // Deadline of ordinary RPCs (pull, push, heartbeat, status).
  absl::Duration rpc_timeout = absl::Seconds(30);
  // How long a task keeps trying to reach the chief at start, and how long the chief
  // waits for every task to register.
  absl::Duration register_timeout = absl::Seconds(60);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A task that cannot reach the chief for this long exits (exit code 1).
  absl::Duration chief_timeout = absl::Seconds(30);
};

// The address this task listens on: options.listen_address, or 0.0.0.0 and the port of
// the task's own address. Errors: INVALID_ARGUMENT the address has no port.
absl::StatusOr<std::string> ResolveListenAddress(const DaemonOptions& options);

// The chief's address from the cluster spec. Errors: NOT_FOUND no chief in the cluster.
absl::StatusOr<std::string> ChiefAddress(const ClusterSpec& cluster);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_OPTIONS_H_
