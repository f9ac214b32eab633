#ifndef PSTRAIN_COMMON_RPC_CALL_AUTHORIZER_H_
#define PSTRAIN_COMMON_RPC_CALL_AUTHORIZER_H_

// Authorization of every call a pstrain server takes, before any handler sees it.
//
// A caller proves it belongs to the job in one of two ways:
// - plaintext: the job's shared token in the call's metadata (kTokenMetadataKey), compared
//   in constant time, with the identity it claims ("worker-1", kIdentityMetadataKey). The
//   token proves membership of the job; the claim keeps a task to its own role's methods
//   (a misconfigured or confused task), but anyone holding the token could claim any
//   role: identities that cannot be forged need TLS.
// - TLS: a certificate from the cluster CA, verified by the TLS handshake, whose common
//   name is the identity ("worker-1", tools/make_certs.sh). Claims are ignored.
// The identity must then be allowed the method by the role table (method_roles.h).
// Health and reflection are open to all.
//
// It runs as a grpc_auth_metadata_processor on the server's credentials, so a refused
// call ends in gRPC's auth filter with UNAUTHENTICATED (no or a wrong token, no
// certificate) or PERMISSION_DENIED (a role the method is not for), its message naming
// no secret, and no handler runs: nothing changes. (gRPC's server interceptors cannot end
// a call before its handler; the processor can, on plaintext servers too.) Each refusal
// is counted and logged, at most once a minute per caller and reason.
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
#include "grpcpp/grpcpp.h"

namespace pstrain {

class CallAuthorizer {
 public:
  // `token`: the job's shared secret; empty: only callers with a certificate pass (a TLS
  // server with no token).
  explicit CallAuthorizer(std::string token);

  // Decides one call to `method` ("/pstrain.Worker/RunSteps"). `certificate_name`: the
  // common name of the peer's verified certificate, empty without TLS; `token` and
  // `claim`: the call's metadata, null when absent. Counts and logs a refusal.
  // Errors: UNAUTHENTICATED no certificate and no or a wrong token, an identity that does
  //         not parse; PERMISSION_DENIED the identity's role may not call `method`.
  absl::Status Check(absl::string_view method, absl::string_view certificate_name,
                     const absl::string_view* token, const absl::string_view* claim)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls refused so far, by reason.
  int64_t refused_unauthenticated() const { return unauthenticated_.load(); }
  int64_t refused_permission_denied() const { return permission_denied_.load(); }

 private:
  void CountAndLog(const absl::Status& refusal, absl::string_view method,
                   const std::string& caller) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string token_;
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

// The identity of a call's caller as the server's authorizer saw it: its certificate's
// common name, else the identity it claims in its metadata. nullopt: neither (a server
// run with --insecure and a client that claims nothing).
// Errors: UNAUTHENTICATED a name that does not parse.
absl::StatusOr<std::optional<CallerIdentity>> CallerOf(const grpc::ServerContext& context);

// OK when the caller of `context` is task (`type`, `index`) ("ps", "worker", "chief";
// "master" is "chief"), or when the call carries no identity or "admin" (authorization is
// off: the role table gives admin none of the methods that make this check);
// PERMISSION_DENIED naming both otherwise: a worker cannot register, heartbeat or send
// chunks as another task.
grpc::Status CheckCallerIsTask(const grpc::ServerContext& context, absl::string_view type,
                               int index);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_CALL_AUTHORIZER_H_
