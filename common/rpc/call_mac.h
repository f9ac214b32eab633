#ifndef PSTRAIN_COMMON_RPC_CALL_MAC_H_
#define PSTRAIN_COMMON_RPC_CALL_MAC_H_

// The message authentication codes that let a plaintext call prove it comes from a holder
// of the job's secret, and its answer prove the same of the server, without the secret
// ever being sent: whoever listens at a task's address learns a MAC good for one call
// (whose nonce the server then refuses to see again), never the secret.
//
// Both are HMAC-SHA256 (OpenSSL) keyed by the job's secret, over fields joined with a
// NUL byte and led by a label of their own, so that a call's MAC can never be passed off
// as a reply's proof or the other way round. Knows nothing of gRPC: the client side is
// common/rpc/client_security.h, the server side common/rpc/call_authorizer.h.
//
// Thread-safe.

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace pstrain {

// 16 random bytes from OpenSSL's generator as 32 lowercase hex characters: unique to
// one call.
std::string NewCallNonce();

// What a caller sends for one call to `method` ("/pstrain.Ps/Push") as `identity`
// ("worker-1") at `time_micros` (Unix time) with `nonce`: 64 lowercase hex characters.
std::string CallMac(absl::string_view secret, absl::string_view method,
                    absl::string_view identity, int64_t time_micros, absl::string_view nonce);

// What a server sends back for the call to `method` with `nonce`, to show it holds the
// secret too: 64 lowercase hex characters.
std::string ReplyProof(absl::string_view secret, absl::string_view method,
                       absl::string_view nonce);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_CALL_MAC_H_
