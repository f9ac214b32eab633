#include "deploy/local/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {

namespace {

// A socket bound to port 0 of every address, IPv6 and IPv4 at once (dual-stack [::]), so
// the port the kernel picks is free on 127.0.0.1 and ::1 alike: a daemon whose TF_CONFIG
// says "localhost:P" listens on both, and a client may try either (::1 first). Without
// IPv6, the IPv4 loopback alone. Returns the fd, or -1 with errno set.
int BindAnyFreePort() {
  const int fd6 = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd6 >= 0) {
    const int off = 0;
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    if (setsockopt(fd6, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) == 0 &&
        bind(fd6, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      return fd6;
    }
    close(fd6);
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::vector<int>> PickFreePorts(int count) {
  std::vector<int> fds;
  std::vector<int> ports;
  absl::Status error;
  for (int i = 0; i < count; ++i) {
    const int fd = BindAnyFreePort();
    if (fd < 0) {
      error = absl::UnavailableError(absl::StrCat("bind: ", std::strerror(errno)));
      break;
    }
    fds.push_back(fd);
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      error = absl::UnavailableError(absl::StrCat("getsockname: ", std::strerror(errno)));
      break;
    }
    ports.push_back(addr.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port)
                        : ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port));
  }
  for (int fd : fds) close(fd);
  if (!error.ok()) return error;
  return ports;
}

}  // namespace pstrain
