#ifndef PSTRAIN_COMMON_RPC_CLIENT_SECURITY_H_
#define PSTRAIN_COMMON_RPC_CLIENT_SECURITY_H_

// What every channel of this process sends to prove who it is (the server side is
// common/rpc/call_authorizer.h). Set once at start: by the daemon runtime from its flags
// and its task (common/daemon/security_flags.h), by psctl from its own flags.
// CreateChannel (common/rpc/grpc_util.h) reads it for each new channel.
//
// A process that sets nothing (a test, a user's custom loop, a tool) sends the token of
// the PSTRAIN_AUTH_TOKEN environment variable, if any, as "admin" (an operator: status,
// ReadState, Shutdown and SaveCheckpoint; common/rpc/method_roles.h).
//
// Thread-safe.

#include <memory>
#include <string>
#include <vector>

#include "common/rpc/caller_identity.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_interceptor.h"

namespace pstrain {

// The environment variable that holds a job's shared token.
inline constexpr char kAuthTokenEnvironmentVariable[] = "PSTRAIN_AUTH_TOKEN";

struct ClientSecurity {
  // The job's shared token; empty: none is sent (a job run with --insecure, or TLS only).
  std::string token;
  // The identity claimed next to the token (ignored by a server that sees a certificate).
  CallerIdentity identity;
  // TLS with this process's certificate, trusting the cluster CA; null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
};

// Replaces this process's client security; channels made before keep theirs.
void SetClientSecurity(ClientSecurity security);

// This process's client security (the environment's default until SetClientSecurity).
ClientSecurity GetClientSecurity();

// The transport credentials of a new channel: the TLS ones of ClientSecurity, else
// plaintext.
std::shared_ptr<grpc::ChannelCredentials> ClientChannelCredentials();

// The interceptors that put the token and the identity on every call of a new channel;
// empty when there is no token.
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientSecurityInterceptors();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_CLIENT_SECURITY_H_
