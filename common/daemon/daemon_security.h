#ifndef PSTRAIN_COMMON_DAEMON_DAEMON_SECURITY_H_
#define PSTRAIN_COMMON_DAEMON_DAEMON_SECURITY_H_

// How a daemon (and psctl) learns the job's secret and who it is, from its flags:
//
//   --auth_token_file=FILE   the job's shared token (one line, 16 to 4096 printable
//                            characters, e.g. `openssl rand -hex 32`); else the
//                            PSTRAIN_AUTH_TOKEN environment variable
//   --tls_dir=DIR            mutual TLS: DIR holds ca.crt (the cluster CA) and this
//                            task's certificate and key, TASK.crt and TASK.key, TASK
//                            its identity: chief-0, ps-1, worker-0 (psctl: admin), as
//                            tools/make_certs.sh names them
//   --tls_ca, --tls_cert, --tls_key
//                            the same three files named one by one (each overrides
//                            --tls_dir's)
//   --insecure               no authorization and no TLS: any process that reaches a
//                            port can stop, read or change the job (one warning line)
//
// With TLS the caller's identity is its certificate's common name, checked by the TLS
// handshake against the cluster CA; a token is then optional (sent and checked only
// where no certificate is seen).
//
// Authorization is on by default: a daemon of a cluster with neither a token nor
// --insecure does not start (exit 2, one line saying what to give). The server side is
// common/rpc/call_authorizer.h, the client side common/rpc/client_security.h, the role
// table common/rpc/method_roles.h.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/daemon/daemon_options.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/client_security.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

// The security flags as given.
struct SecurityFlags {
  std::string auth_token_file;
  bool insecure = false;
  std::string tls_dir;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
};
SecurityFlags SecurityFlagsFromCommandLine();

// Reads the job's token: from `auth_token_file` when set, else from PSTRAIN_AUTH_TOKEN;
// "" when neither is set.
// Errors: INVALID_ARGUMENT an unreadable file, a token shorter than 16 characters or
//         longer than 4096, or one with characters a gRPC header cannot carry (only
//         printable ASCII; spaces and newlines at its ends are dropped).
absl::StatusOr<std::string> ReadAuthToken(const std::string& auth_token_file);

// The TLS files of `identity` (see --tls_dir above), read; nullopt when no --tls_* flag
// is set.
// Errors: INVALID_ARGUMENT a file that is missing, unreadable or not PEM, named.
absl::StatusOr<std::optional<TlsMaterial>> ReadTlsMaterial(const SecurityFlags& flags,
                                                           const CallerIdentity& identity);

// What a client process that is not a daemon (psctl) sends, as `identity`: the token and
// the TLS files of `flags`.
// Errors: as ReadAuthToken and ReadTlsMaterial.
absl::StatusOr<ClientSecurity> ClientSecurityFromFlags(const SecurityFlags& flags,
                                                       const CallerIdentity& identity);

// What a daemon's server and channels carry.
struct DaemonSecurity {
  // Null with --insecure.
  std::shared_ptr<CallAuthorizer> authorizer;
  // The server's credentials; null with --insecure (plaintext, no authorization).
  std::shared_ptr<grpc::ServerCredentials> server_credentials;
  // What this daemon's channels send: the token and the task's own identity.
  ClientSecurity client;
};

// The security of the task `options` describe (a daemon without a cluster, train's
// one-process strategies, serves nothing and needs none).
// Errors: INVALID_ARGUMENT as ReadAuthToken, or a daemon of a cluster with no token and
//         no --insecure (the message says what to give).
absl::StatusOr<DaemonSecurity> DaemonSecurityFor(const DaemonOptions& options,
                                                 const SecurityFlags& flags);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_DAEMON_SECURITY_H_
