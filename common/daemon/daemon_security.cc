#include "common/daemon/daemon_security.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the job's shared auth token (one line; e.g. `openssl rand -hex 32`); "
          "default: the PSTRAIN_AUTH_TOKEN environment variable. Every daemon of the job and "
          "psctl need the same token");
ABSL_FLAG(bool, insecure, false,
          "Turn authorization and TLS off: any process that reaches this daemon's port can "
          "stop, read or change the job");
ABSL_FLAG(std::string, tls_dir, "",
          "Mutual TLS: a folder with ca.crt (the cluster CA) and this task's TASK.crt and "
          "TASK.key (TASK: chief-0, ps-1, worker-0; psctl: admin), as tools/make_certs.sh "
          "writes them");
ABSL_FLAG(std::string, tls_ca, "", "Mutual TLS: the cluster CA's certificate (PEM)");
ABSL_FLAG(std::string, tls_cert, "", "Mutual TLS: this task's certificate (PEM)");
ABSL_FLAG(std::string, tls_key, "", "Mutual TLS: this task's private key (PEM)");

namespace pstrain {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr size_t kMaxTokenLength = 4096;

absl::StatusOr<std::string> CheckToken(std::string token, const std::string& source) {
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.size() < kMinTokenLength || token.size() > kMaxTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the auth token in ", source, " must have ", kMinTokenLength, " to ", kMaxTokenLength,
        " characters (it has ", token.size(), "); make one with `openssl rand -hex 32`"));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the auth token in ", source,
          " may hold only printable ASCII characters without spaces (a gRPC header carries it)"));
    }
  }
  return token;
}

}  // namespace

SecurityFlags SecurityFlagsFromCommandLine() {
  SecurityFlags flags;
  flags.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  flags.insecure = absl::GetFlag(FLAGS_insecure);
  flags.tls_dir = absl::GetFlag(FLAGS_tls_dir);
  flags.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  flags.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  flags.tls_key = absl::GetFlag(FLAGS_tls_key);
  return flags;
}

namespace {

// A PEM file's text. Errors: INVALID_ARGUMENT unreadable or not PEM, naming `flag`.
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " is not set (give --tls_dir, or all of --tls_ca, --tls_cert and --tls_key)"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  if (!in || !(contents << in.rdbuf())) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  }
  if (contents.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is not a PEM file"));
  }
  return contents.str();
}

}  // namespace

absl::StatusOr<std::optional<TlsMaterial>> ReadTlsMaterial(const SecurityFlags& flags,
                                                           const CallerIdentity& identity) {
  if (flags.tls_dir.empty() && flags.tls_ca.empty() && flags.tls_cert.empty() &&
      flags.tls_key.empty()) {
    return std::nullopt;
  }
  const std::string dir = flags.tls_dir.empty() ? "" : flags.tls_dir + "/";
  const std::string name = FormatIdentity(identity);
  auto pick = [&](const std::string& given, const std::string& in_dir) {
    return !given.empty() ? given : dir.empty() ? std::string() : dir + in_dir;
  };
  TlsMaterial tls;
  absl::StatusOr<std::string> ca = ReadPem("--tls_ca", pick(flags.tls_ca, "ca.crt"));
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = ReadPem("--tls_cert", pick(flags.tls_cert, name + ".crt"));
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("--tls_key", pick(flags.tls_key, name + ".key"));
  if (!key.ok()) return key.status();
  tls.ca = *std::move(ca);
  tls.cert = *std::move(cert);
  tls.key = *std::move(key);
  return tls;
}

absl::StatusOr<ClientSecurity> ClientSecurityFromFlags(const SecurityFlags& flags,
                                                       const CallerIdentity& identity) {
  ClientSecurity security;
  security.identity = identity;
  absl::StatusOr<std::string> token = ReadAuthToken(flags.auth_token_file);
  if (!token.ok()) return token.status();
  security.token = *token;
  absl::StatusOr<std::optional<TlsMaterial>> tls = ReadTlsMaterial(flags, identity);
  if (!tls.ok()) return tls.status();
  if (tls->has_value()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = (*tls)->ca;
    options.pem_cert_chain = (*tls)->cert;
    options.pem_private_key = (*tls)->key;
    security.channel_credentials = grpc::SslCredentials(options);
  }
  return security;
}

absl::StatusOr<std::string> ReadAuthToken(const std::string& auth_token_file) {
  if (!auth_token_file.empty()) {
    std::ifstream in(auth_token_file, std::ios::binary);
    std::ostringstream contents;
    if (!in || !(contents << in.rdbuf())) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth_token_file: cannot read ", auth_token_file));
    }
    return CheckToken(contents.str(), auth_token_file);
  }
  const char* env = std::getenv(kAuthTokenEnvironmentVariable);
  if (env == nullptr || *env == '\0') return std::string();
  return CheckToken(env, kAuthTokenEnvironmentVariable);
}

absl::StatusOr<DaemonSecurity> DaemonSecurityFor(const DaemonOptions& options,
                                                 const SecurityFlags& flags) {
  DaemonSecurity security;
  // kAdmin: no cluster, so no task of one.
  const Role role = options.config.task.type;
  const bool tls_given = !flags.tls_dir.empty() || !flags.tls_ca.empty() ||
                         !flags.tls_cert.empty() || !flags.tls_key.empty();
  if (flags.insecure) {
    if (tls_given) {
      return absl::InvalidArgumentError("--insecure turns TLS off: give it or --tls_*, not both");
    }
    LogWarning(
        "--insecure: authorization and TLS are off; any process that reaches this daemon's "
        "port can stop, read or change the job");
    security.client.identity = {Role::kAdmin, 0};
    return security;
  }
  CallerIdentity identity{Role::kAdmin, 0};
  if (role == Role::kEvaluator) {
    // An evaluator (chief/evaluator_task.h) reads checkpoint files: it serves no RPC and
    // calls none, so it needs no token, no certificate and no identity of its own
    // (common/rpc/caller_identity.h has none for it); what was given is ignored.
    return security;
  }
  if (role != Role::kAdmin) identity = {role, options.config.task.index};
  absl::StatusOr<ClientSecurity> client = ClientSecurityFromFlags(flags, identity);
  if (!client.ok()) return client.status();
  security.client = *std::move(client);
  // No cluster: nothing is served to others, but what was given is still sent.
  if (role == Role::kAdmin) return security;
  if (security.client.token.empty() && !tls_given) {
    return absl::InvalidArgumentError(absl::StrCat(
        "authorization is on and there is no auth token: give every daemon of the job the "
        "same secret with --auth_token_file=FILE or the ", kAuthTokenEnvironmentVariable,
        " environment variable (make one with `openssl rand -hex 32`), or certificates with "
        "--tls_dir (tools/make_certs.sh), or run with --insecure to turn authorization off"));
  }
  absl::StatusOr<std::optional<TlsMaterial>> tls = ReadTlsMaterial(flags, identity);
  if (!tls.ok()) return tls.status();
  security.authorizer = std::make_shared<CallAuthorizer>(security.client.token);
  // Every task of the job checks calls and proves it did: an answer without that proof
  // comes from a process that is not of the job (one listening at a task's address).
  security.client.require_server_proof = true;
  security.server_credentials = AuthorizingServerCredentials(
      security.authorizer, tls->has_value() ? &**tls : nullptr);
  return security;
}

}  // namespace pstrain
