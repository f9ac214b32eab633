#include "common/rpc/call_mac.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <initializer_list>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// HMAC-SHA256 of `fields` joined by NUL bytes: no field of this protocol holds a NUL
// (gRPC metadata cannot), so two different lists never give the same input.
std::string Hmac(absl::string_view secret, std::initializer_list<absl::string_view> fields) {
  std::string input;
  for (absl::string_view field : fields) {
    input.append(field.data(), field.size());
    input.push_back('\0');
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest,
           &length) == nullptr) {
    // OpenSSL out of memory: an empty MAC matches nothing, so the call is refused.
    return "";
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace

std::string NewCallNonce() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // The generator failed (not seeded): no nonce; the server refuses a call without one,
    // rather than this process sending a guessable one.
    return "";
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes),
                                                  sizeof(bytes)));
}

std::string CallMac(absl::string_view secret, absl::string_view method,
                    absl::string_view identity, int64_t time_micros, absl::string_view nonce) {
  const std::string time = absl::StrCat(time_micros);
  return Hmac(secret, {"pstrain-call-v1", method, identity, time, nonce});
}

std::string ReplyProof(absl::string_view secret, absl::string_view method,
                       absl::string_view nonce) {
  return Hmac(secret, {"pstrain-reply-v1", method, nonce});
}

}  // namespace pstrain
