#ifndef PSTRAIN_COMMON_RPC_CALLER_IDENTITY_H_
#define PSTRAIN_COMMON_RPC_CALLER_IDENTITY_H_

// Who calls a pstrain RPC: a role and an index, as a task of the cluster spec is named.
// Knows nothing of gRPC: common/rpc/call_authorizer.h reads it from a call (the peer's
// certificate, or the claim a client makes under its call's MAC).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster_spec.h"

namespace pstrain {

// Call metadata a pstrain client sends (common/rpc/client_security.h): the identity it
// claims (FormatIdentity's form), the time (Unix microseconds) and a nonce of the call,
// and the call's MAC over them keyed by the job's secret (common/rpc/call_mac.h). The
// secret itself is never sent.
inline constexpr char kIdentityMetadataKey[] = "x-pstrain-identity";
inline constexpr char kTimeMetadataKey[] = "x-pstrain-time";
inline constexpr char kNonceMetadataKey[] = "x-pstrain-nonce";
inline constexpr char kMacMetadataKey[] = "x-pstrain-mac";
// What a server that checked a call's MAC sends back in its initial and trailing
// metadata: its own proof that it holds the secret (ReplyProof over the call's nonce).
inline constexpr char kReplyProofMetadataKey[] = "x-pstrain-reply-proof";

// The caller's role is the one Role enum of common/cluster_spec.h (kChief, kWorker,
// kPs, or kAdmin: an operator's tool or a test harness that reads status, stops,
// checkpoints; an evaluator runs no pstrain daemon and calls nothing).

struct CallerIdentity {
  Role role = Role::kAdmin;
  int index = 0;

  bool operator==(const CallerIdentity& other) const {
    return role == other.role && index == other.index;
  }
  bool operator!=(const CallerIdentity& other) const { return !(*this == other); }
};

// A TF_CONFIG task type ("chief", "master", "worker", "ps") or "admin" as a role.
// Errors: INVALID_ARGUMENT any other name (an "evaluator" runs no pstrain daemon).
absl::StatusOr<Role> RoleFromName(absl::string_view name);

// "worker-1" ("admin" for the operator): the claim a client sends, and the common name
// (CN) of a task's certificate and its file names in a --tls_dir (tools/make_certs.sh).
std::string FormatIdentity(const CallerIdentity& identity);

// Reads FormatIdentity's form back; "chief" and "admin" alone mean index 0.
// Errors: INVALID_ARGUMENT anything else (an unknown role, a negative or missing index).
absl::StatusOr<CallerIdentity> ParseIdentity(absl::string_view text);

// Compares two secrets in time that depends on their lengths only, not on where they
// first differ, so that a caller cannot find the job's token byte by byte by timing.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_CALLER_IDENTITY_H_
