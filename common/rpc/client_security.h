#ifndef PSTRAIN_COMMON_RPC_CLIENT_SECURITY_H_
#define PSTRAIN_COMMON_RPC_CLIENT_SECURITY_H_

// What every channel of this process sends to prove who it is (the server side is
// common/rpc/call_authorizer.h). Set once at start: by the daemon runtime from its flags
// and its task (common/daemon/security_flags.h), by psctl from its own flags.
// CreateChannel (common/rpc/grpc_util.h) reads it for each new channel.
//
// A process that sets nothing (a test, a user's custom loop, a tool) authenticates with
// the token of the PSTRAIN_AUTH_TOKEN environment variable, if any, as "admin" (an
// operator: status,
// ReadState, Shutdown and SaveCheckpoint; common/rpc/method_roles.h).
//
// Thread-safe.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/rpc/caller_identity.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_interceptor.h"

namespace pstrain {

// The environment variable that holds a job's shared token.
inline constexpr char kAuthTokenEnvironmentVariable[] = "PSTRAIN_AUTH_TOKEN";

struct ClientSecurity {
  // The job's shared token: the key of each call's MAC (common/rpc/call_mac.h), never
  // sent itself; empty: calls carry no MAC (a job run with --insecure, or TLS only).
  std::string token;
  // The identity claimed under the MAC (ignored by a server that sees a certificate).
  CallerIdentity identity;
  // TLS with this process's certificate, trusting the cluster CA; null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  // On a plaintext channel with a token: refuse an answer whose server does not prove it
  // holds the token too (MakeClientSecurityInterceptors). Set for a task of a job with
  // authorization on (common/daemon/daemon_security.h), whose peers all check calls, and
  // by psctl (but for its health check, open to all); off for a process that may also
  // call servers run without it (a test, a tool of one's own).
  bool require_server_proof = false;
};

// Replaces this process's client security; channels made before keep theirs.
void SetClientSecurity(ClientSecurity security);

// This process's client security (the environment's default until SetClientSecurity).
ClientSecurity GetClientSecurity();

// The transport credentials of a new channel: the TLS ones of ClientSecurity, else
// plaintext.
std::shared_ptr<grpc::ChannelCredentials> ClientChannelCredentials();

// Adds to `context` what the interceptors below add to a call to `method`
// ("/pstrain.ParameterServer/Push") as `claim` ("worker-1") keyed by `token`, for a caller
// on a channel of its own (a test acting as several tasks); its answer is not checked.
void AddCallCredentials(absl::string_view token, absl::string_view claim,
                        absl::string_view method, grpc::ClientContext* context);

// The interceptors that authenticate every call of a new channel: its identity, time,
// nonce and MAC keyed by the token. On a plaintext channel with require_server_proof
// they also check that the server proves it holds the token (its ReplyProof over the
// call's nonce, in its initial or trailing metadata); an answer without it is turned into UNAUTHENTICATED when its
// code is one a client acts on (OK, INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS,
// FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE, DATA_LOSS), so no caller obeys a shutdown,
// a heartbeat's shutdown:true or a placement from a process that is not of the job.
// A server of the job sends its proof in its initial metadata, before any message: a
// stream whose first message comes without it is cancelled there (the caller may hold
// that one message; its next Read fails) and its status is UNAUTHENTICATED whatever the
// server said, so a caller that uses a stream's messages only once its status is OK (as
// the ps client's PushPullStream does) acts on none. Empty when there is no token.
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientSecurityInterceptors();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_CLIENT_SECURITY_H_
