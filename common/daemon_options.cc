#include "common/daemon_options.h"

#include "common/rpc/grpc_util.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::string> ResolveListenAddress(const DaemonOptions& options) {
  if (!options.listen_address.empty()) return options.listen_address;
  PS_ASSIGN_OR_RETURN(std::string own, options.config.cluster.address(options.config.task));
  return ListenAddressFor(own);
}

absl::StatusOr<std::string> ChiefAddress(const ClusterSpec& cluster) {
  if (cluster.num_tasks("chief") == 0) {
    return absl::NotFoundError("the cluster spec has no chief task");
  }
  return cluster.tasks("chief")[0];
}

}  // namespace pstrain
