#include "common/daemon/daemon_options.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

struct HostPort {
  std::string host;
  bool has_port = false;  // a ":" follows the host (the port may still be empty or bad)
  std::string port;
};

// "host:port", "[v6]:port", "host", "[v6]" or a bare "::1".
HostPort SplitHostPort(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return {std::string(address), false, ""};
    absl::string_view rest = address.substr(close + 1);
    const bool has_port = absl::ConsumePrefix(&rest, ":");
    return {std::string(address.substr(0, close + 1)), has_port, std::string(rest)};
  }
  const size_t colon = address.rfind(':');
  // More than one colon without brackets: a bare IPv6 address, no port.
  if (colon == absl::string_view::npos || address.find(':') != colon) {
    return {std::string(address), false, ""};
  }
  return {std::string(address.substr(0, colon)), true, std::string(address.substr(colon + 1))};
}

absl::StatusOr<int> ValidPort(absl::string_view address, const std::string& port) {
  int value = -1;
  if (!absl::SimpleAtoi(port, &value) || value < 0 || value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", address, "\" has no valid port"));
  }
  return value;
}

}  // namespace

bool IsLoopbackHost(absl::string_view host) {
  std::string h = absl::AsciiStrToLower(host);
  absl::string_view v = h;
  absl::ConsumePrefix(&v, "[");
  absl::ConsumeSuffix(&v, "]");
  if (v == "localhost" || v == "::1" || v == "ip6-localhost") return true;
  // 127.0.0.0/8: four numbers of 0-255, the first 127.
  const std::vector<absl::string_view> parts = absl::StrSplit(v, '.');
  if (parts.size() != 4) return false;
  for (size_t i = 0; i < parts.size(); ++i) {
    int n = -1;
    if (parts[i].empty() || !absl::ascii_isdigit(parts[i][0]) || !absl::SimpleAtoi(parts[i], &n) ||
        n < 0 || n > 255 || (i == 0 && n != 127)) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> ResolveListenAddress(const DaemonOptions& options) {
  PS_ASSIGN_OR_RETURN(std::string own, options.config.cluster.address(options.config.task));
  const HostPort own_parts = SplitHostPort(own);
  PS_ASSIGN_OR_RETURN(int own_port, ValidPort(own, own_parts.port));
  if (!options.bind.empty()) {
    const HostPort bind = SplitHostPort(options.bind);
    if (!bind.has_port) return absl::StrCat(bind.host, ":", own_port);
    PS_ASSIGN_OR_RETURN(int port, ValidPort(options.bind, bind.port));
    return absl::StrCat(bind.host, ":", port);
  }
  return ListenAddressFor(own);
}

absl::StatusOr<std::string> ListenAddressFor(absl::string_view address) {
  const HostPort parts = SplitHostPort(address);
  PS_ASSIGN_OR_RETURN(int port, ValidPort(address, parts.port));
  if (IsLoopbackHost(parts.host)) return absl::StrCat(parts.host, ":", port);
  return absl::StrCat("0.0.0.0:", port);
}

absl::StatusOr<std::string> ChiefAddress(const ClusterSpec& cluster) {
  if (cluster.num_tasks(Role::kChief) == 0) {
    return absl::NotFoundError("the cluster spec has no chief task");
  }
  return cluster.tasks(Role::kChief)[0];
}

absl::StatusOr<int> HealthPortFromEnvironment() {
  const char* value = std::getenv(kHealthPortEnvironmentVariable);
  if (value == nullptr || *value == '\0') return 0;
  int port = 0;
  if (!absl::SimpleAtoi(value, &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(kHealthPortEnvironmentVariable, "=", value,
                                                   " is not a port (1-65535)"));
  }
  return port;
}

}  // namespace pstrain
