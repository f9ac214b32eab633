#include "common/rpc/call_mac.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <initializer_list>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// A context keyed with one secret, kept per thread. Each MAC restarts it with
// EVP_MAC_init and no key, which OpenSSL 3's HMAC answers from the key state it kept (the
// pads already hashed; openssl/openssl#18100 made that restart exact in 3.0): no context
// is allocated per MAC. OpenSSL's one-shot HMAC() looks the algorithm up and sets the key
// on every call, and a copy of a keyed context (EVP_MAC_CTX_dup) allocates three digest
// contexts: about 12,000 instructions a MAC against 8,400 (four MACs an RPC;
// bench/README.md, "1 KiB push-and-pulls").
struct KeyedHmac {
  std::string secret;
  EVP_MAC_CTX* context = nullptr;
  ~KeyedHmac() { EVP_MAC_CTX_free(context); }
};

// HMAC-SHA256 keyed by `secret`; null when OpenSSL fails (out of memory). Not owned: the
// calling thread's, in whatever state its last MAC left it (Hmac restarts it).
EVP_MAC_CTX* KeyedContext(absl::string_view secret) {
  static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  thread_local KeyedHmac keyed;
  if (keyed.context != nullptr && keyed.secret == secret) return keyed.context;
  EVP_MAC_CTX_free(keyed.context);
  keyed.context = hmac != nullptr ? EVP_MAC_CTX_new(hmac) : nullptr;
  keyed.secret.assign(secret.data(), secret.size());
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (keyed.context != nullptr &&
      EVP_MAC_init(keyed.context, reinterpret_cast<const unsigned char*>(secret.data()),
                   secret.size(), params) != 1) {
    EVP_MAC_CTX_free(keyed.context);
    keyed.context = nullptr;
  }
  return keyed.context;
}

// HMAC-SHA256 of `fields` joined by NUL bytes: no field of this protocol holds a NUL
// (gRPC metadata cannot), so two different lists never give the same input.
std::string Hmac(absl::string_view secret, std::initializer_list<absl::string_view> fields) {
  EVP_MAC_CTX* context = KeyedContext(secret);
  // OpenSSL failed (out of memory): an empty MAC matches nothing, so the call is refused.
  if (context == nullptr || EVP_MAC_init(context, nullptr, 0, nullptr) != 1) return "";
  const unsigned char nul = 0;
  bool ok = true;
  for (absl::string_view field : fields) {
    ok = ok &&
         EVP_MAC_update(context, reinterpret_cast<const unsigned char*>(field.data()),
                        field.size()) == 1 &&
         EVP_MAC_update(context, &nul, 1) == 1;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  size_t length = 0;
  ok = ok && EVP_MAC_final(context, digest, &length, sizeof(digest)) == 1;
  if (!ok) return "";
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
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
