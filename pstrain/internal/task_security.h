#ifndef PSTRAIN_PSTRAIN_INTERNAL_TASK_SECURITY_H_
#define PSTRAIN_PSTRAIN_INTERNAL_TASK_SECURITY_H_

// The security of a custom-loop task (multi_worker_mirrored, parameter_server): the same
// authorization and TLS the daemons get from common/daemon/daemon_security.h, from
// StrategyOptions' fields and the program's --auth_token_file, --tls_*, --insecure flags.

#include <memory>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "common/daemon/daemon_security.h"
#include "grpcpp/grpcpp.h"
#include "pstrain/strategy.h"

namespace pstrain::distribute::internal {

// `options`' security fields, each empty one (false) replaced by the flag of its name.
SecurityFlags SecurityFlagsOf(const StrategyOptions& options);

// Makes this process's channels made from now on authenticate each call as this task
// (config.task: "worker-1") with a MAC keyed by the token (never the token itself), and
// check that their servers prove they hold it too, over TLS when certificates are given,
// and returns the credentials this task's servers take: they refuse, before any handler,
// a call without a good MAC or a certificate of the cluster CA, or from a role the
// method is not for (common/rpc/method_roles.h). Null with `insecure` (one warning line): plaintext, no
// authorization. Call it before making any channel.
// Errors: INVALID_ARGUMENT no token, certificate or insecure (saying what to give), or
//         a token or certificate file that cannot be used, named.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> SecureTask(
    const StrategyOptions& options, const TfConfig& config);

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_TASK_SECURITY_H_
