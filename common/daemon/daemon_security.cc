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
          "Turn authorization off: any process that reaches this daemon's port can stop, read "
          "or change the job");

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

std::string TaskType(const DaemonOptions& options) {
  return options.config.task.type == "master" ? "chief" : options.config.task.type;
}

}  // namespace

SecurityFlags SecurityFlagsFromCommandLine() {
  return {absl::GetFlag(FLAGS_auth_token_file), absl::GetFlag(FLAGS_insecure)};
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
  const std::string type = TaskType(options);
  if (flags.insecure) {
    LogWarning(
        "--insecure: authorization is off; any process that reaches this daemon's port can "
        "stop, read or change the job");
    security.client.identity = {Role::kAdmin, 0};
    return security;
  }
  absl::StatusOr<std::string> token = ReadAuthToken(flags.auth_token_file);
  if (!token.ok()) return token.status();
  if (type.empty()) {
    // No cluster: nothing is served to others, but a token given is still sent.
    security.client = {*token, {Role::kAdmin, 0}};
    return security;
  }
  if (token->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "authorization is on and there is no auth token: give every daemon of the job the "
        "same secret with --auth_token_file=FILE or the ", kAuthTokenEnvironmentVariable,
        " environment variable (make one with `openssl rand -hex 32`), or run with "
        "--insecure to turn authorization off"));
  }
  absl::StatusOr<Role> role = RoleFromName(type);
  if (!role.ok()) return role.status();
  security.client = {*token, {*role, options.config.task.index}};
  security.authorizer = std::make_shared<CallAuthorizer>(*token);
  security.server_credentials = AuthorizingInsecureServerCredentials(security.authorizer);
  return security;
}

}  // namespace pstrain
