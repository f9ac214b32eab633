#include "pstrain/internal/task_security.h"

#include <string>
#include <utility>

#include "common/daemon/daemon_options.h"
#include "common/rpc/client_security.h"

namespace pstrain::distribute::internal {

SecurityFlags SecurityFlagsOf(const StrategyOptions& options) {
  SecurityFlags flags = SecurityFlagsFromCommandLine();
  auto take = [](const std::string& given, std::string* flag) {
    if (!given.empty()) *flag = given;
  };
  take(options.auth_token_file, &flags.auth_token_file);
  take(options.tls_dir, &flags.tls_dir);
  take(options.tls_ca, &flags.tls_ca);
  take(options.tls_cert, &flags.tls_cert);
  take(options.tls_key, &flags.tls_key);
  flags.insecure = flags.insecure || options.insecure;
  return flags;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> SecureTask(
    const StrategyOptions& options, const TfConfig& config) {
  DaemonOptions task;
  task.config = config;
  absl::StatusOr<DaemonSecurity> security = DaemonSecurityFor(task, SecurityFlagsOf(options));
  if (!security.ok()) return security.status();
  SetClientSecurity(security->client);
  return security->server_credentials;
}

}  // namespace pstrain::distribute::internal
