#include "common/rpc/call_mac.h"

// SHA256_Init, SHA256_Update and SHA256_Final are deprecated in OpenSSL 3 (KeyedSha256
// below says why they are used).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstring>
#include <initializer_list>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// HMAC-SHA256 (RFC 2104) keyed with one secret, kept per thread as the SHA-256 states
// after the key's inner and outer pads: a MAC then costs a copy of each state and the
// hashing of its own bytes. OpenSSL 3's EVP_MAC allocates and frees a provider context
// for every MAC (EVP_MAC_CTX_dup, about 13,000 instructions and a dozen mallocs each,
// four MACs per RPC; bench/README.md, "1 KiB push-and-pulls"), and its one-shot HMAC()
// also looks the algorithm up and sets the key each time. The low-level SHA-256 calls,
// deprecated in OpenSSL 3 but kept, run the same assembly as the EVP digest.
struct KeyedSha256 {
  std::string secret;
  SHA256_CTX inner;  // after the key ^ ipad block
  SHA256_CTX outer;  // after the key ^ opad block
  bool keyed = false;

  ~KeyedSha256() {
    OPENSSL_cleanse(&inner, sizeof(inner));
    OPENSSL_cleanse(&outer, sizeof(outer));
  }
};

// The calling thread's states for `secret`.
const KeyedSha256& KeyedStates(absl::string_view secret) {
  thread_local KeyedSha256 keyed;
  if (keyed.keyed && keyed.secret == secret) return keyed;
  unsigned char key[SHA256_CBLOCK] = {};
  if (secret.size() > sizeof(key)) {
    SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), key);
  } else {
    std::memcpy(key, secret.data(), secret.size());
  }
  unsigned char pad[SHA256_CBLOCK];
  for (size_t i = 0; i < sizeof(pad); ++i) pad[i] = key[i] ^ 0x36;
  SHA256_Init(&keyed.inner);
  SHA256_Update(&keyed.inner, pad, sizeof(pad));
  for (size_t i = 0; i < sizeof(pad); ++i) pad[i] = key[i] ^ 0x5c;
  SHA256_Init(&keyed.outer);
  SHA256_Update(&keyed.outer, pad, sizeof(pad));
  OPENSSL_cleanse(key, sizeof(key));
  OPENSSL_cleanse(pad, sizeof(pad));
  keyed.secret.assign(secret.data(), secret.size());
  keyed.keyed = true;
  return keyed;
}

// HMAC-SHA256 of `fields` joined by NUL bytes: no field of this protocol holds a NUL
// (gRPC metadata cannot), so two different lists never give the same input.
std::string Hmac(absl::string_view secret, std::initializer_list<absl::string_view> fields) {
  const KeyedSha256& keyed = KeyedStates(secret);
  SHA256_CTX context = keyed.inner;
  const unsigned char nul = 0;
  for (absl::string_view field : fields) {
    SHA256_Update(&context, field.data(), field.size());
    SHA256_Update(&context, &nul, 1);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256_Final(digest, &context);
  context = keyed.outer;
  SHA256_Update(&context, digest, sizeof(digest));
  SHA256_Final(digest, &context);
  OPENSSL_cleanse(&context, sizeof(context));
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
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
