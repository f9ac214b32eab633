#ifndef PSTRAIN_COMMON_RPC_CALL_AUTHORIZER_H_
#define PSTRAIN_COMMON_RPC_CALL_AUTHORIZER_H_

// Authorization of every call a pstrain server takes, before any handler sees it.
//
// A caller proves it belongs to the job in one of two ways:
// - plaintext: a MAC over the call (common/rpc/call_mac.h), keyed by the job's shared
//   secret: over the method, the identity it claims ("worker-1", kIdentityMetadataKey),
//   the call's time and a nonce. The secret is never sent, so a listener at a task's
//   address learns no more than one call's MAC; a call whose time is more than a minute
//   from the server's clock, or whose nonce was seen before, is refused (ReplayCache).
//   The server answers each call it accepted with its own proof of the secret
//   (ReplyProof over the nonce, kReplyProofMetadataKey, added by the factory of
//   ReplyProofInterceptorFactory), which a task's client checks before it obeys the
//   answer (common/rpc/client_security.h). The MAC proves membership of the job; the claim
//   keeps a task to its own role's methods (a misconfigured or confused task), but any
//   holder of the secret could claim any role: identities that cannot be forged need TLS.
//   The MAC covers the call's metadata, not its messages: an attacker on the path (not
//   only listening) could alter them; only TLS protects those.
// - TLS: a certificate from the cluster CA, verified by the TLS handshake, whose common
//   name is the identity ("worker-1", tools/make_certs.sh). Claims are ignored.
// The identity must then be allowed the method by the role table (method_roles.h).
// Health and reflection are open to all.
//
// It runs as a grpc_auth_metadata_processor on the server's credentials, so a refused
// call ends in gRPC's auth filter with UNAUTHENTICATED (no or a wrong MAC, a replayed or
// stale call, no certificate) or PERMISSION_DENIED (a role the method is not for), its
// message naming no secret, and no handler runs: nothing changes. (gRPC's server
// interceptors cannot end a call before its handler; the processor can, on plaintext
// servers too.) Each refusal is counted and logged, at most once a minute per caller and
// reason.
//
// Handlers whose request names a task (RegisterTask as ps 0, PushChunk from rank 1) also
// check it is the caller's own with CheckCallerIsTask.
//
// Thread-safe.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/rpc/caller_identity.h"
#include "common/rpc/replay_cache.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

// The authentication metadata of one plaintext call, as views into it; a field the
// call lacks is empty.
struct CallCredentialsMetadata {
  absl::string_view claim;  // kIdentityMetadataKey
  absl::string_view time;   // kTimeMetadataKey
  absl::string_view nonce;  // kNonceMetadataKey
  absl::string_view mac;    // kMacMetadataKey
};

class CallAuthorizer {
 public:
  // `token`: the job's shared secret; empty: only callers with a certificate pass (a TLS
  // server with no token).
  explicit CallAuthorizer(std::string token);

  // Decides one call to `method` ("/pstrain.FunctionWorker/RunFunction").
  // `certificate_name`: the common name of the peer's verified certificate, empty without
  // TLS; `call`: the call's metadata. Counts and logs a refusal; remembers an accepted
  // call's nonce.
  // Errors: UNAUTHENTICATED no certificate and no or a wrong MAC, a time outside the
  //         window, a replayed nonce, an identity that does not parse;
  //         PERMISSION_DENIED the identity's role may not call `method`.
  absl::Status Check(absl::string_view method, absl::string_view certificate_name,
                     const CallCredentialsMetadata& call) ABSL_LOCKS_EXCLUDED(mu_);

  // The proof a server sends back for the call to `method` with `nonce` (ReplyProof,
  // common/rpc/call_mac.h); empty when this authorizer has no token.
  std::string ReplyProofFor(absl::string_view method, absl::string_view nonce) const;

  // Calls refused so far, by reason.
  int64_t refused_unauthenticated() const { return unauthenticated_.load(); }
  int64_t refused_permission_denied() const { return permission_denied_.load(); }

 private:
  void CountAndLog(const absl::Status& refusal, absl::string_view method,
                   const std::string& caller) ABSL_LOCKS_EXCLUDED(mu_);
  // The plaintext check: the MAC, then the time and nonce.
  absl::Status CheckMac(absl::string_view method, const CallCredentialsMetadata& call);

  const std::string token_;
  ReplayCache replay_cache_;
  std::atomic<int64_t> unauthenticated_{0};
  std::atomic<int64_t> permission_denied_{0};

  // State below is protected by mu_.
  absl::Mutex mu_;
  // When each (caller, reason) was last logged, and how many refusals since.
  struct LogState {
    absl::Time last_logged = absl::InfinitePast();
    int64_t unlogged = 0;
  };
  absl::flat_hash_map<std::string, LogState> log_state_ ABSL_GUARDED_BY(mu_);
};

// A TLS identity and the CA that vouches for its peers, as PEM text.
struct TlsMaterial {
  std::string ca;    // the cluster CA's certificate: peers must present one it signed
  std::string cert;  // this process's certificate (its chain)
  std::string key;   // its private key
};

// Server credentials whose every call passes `authorizer` before its handler: plaintext
// when `tls` is null; else TLS that requires a client certificate signed by `tls->ca`
// (mutual TLS: a peer without one fails the handshake).
std::shared_ptr<grpc::ServerCredentials> AuthorizingServerCredentials(
    std::shared_ptr<CallAuthorizer> authorizer, const TlsMaterial* tls = nullptr);

// Makes the server interceptor factory that sends back, in the initial and trailing
// metadata of each call with a MAC, the server's proof over its nonce
// (CallAuthorizer::ReplyProofFor): for a unary call it adds the proof to the call's
// context and makes no interceptor (gRPC 1.51's interception costs each intercepted batch
// an extra trip through the core); a streaming call gets an interceptor that adds it as
// the metadata is sent. StartServer (common/rpc/grpc_util.h) puts it on every server
// whose `credentials` came from AuthorizingServerCredentials; null for any other
// credentials (--insecure). A call reaches it only once the authorizer accepted it; an
// open method's (health) gets a proof for any nonce, which proves nothing but the health
// answer.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ReplyProofInterceptorFactory(const std::shared_ptr<grpc::ServerCredentials>& credentials);

// The identity of a call's caller as the server's authorizer saw it: its certificate's
// common name, else the identity it claims in its metadata. nullopt: neither (a server
// run with --insecure and a client that claims nothing).
// Errors: UNAUTHENTICATED a name that does not parse.
absl::StatusOr<std::optional<CallerIdentity>> CallerOf(const grpc::ServerContextBase& context);

// OK when the caller of `context` is task (`type`, `index`) ("ps", "worker", "chief";
// "master" is "chief"), or when the call carries no identity or "admin" (authorization is
// off: the role table gives admin none of the methods that make this check);
// PERMISSION_DENIED naming both otherwise: a worker cannot register, heartbeat or send
// chunks as another task.
grpc::Status CheckCallerIsTask(const grpc::ServerContextBase& context, absl::string_view type,
                               int index);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_CALL_AUTHORIZER_H_
