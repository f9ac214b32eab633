#include "deploy/local/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<std::vector<int>> PickFreePorts(int count) {
  std::vector<int> fds;
  std::vector<int> ports;
  absl::Status error;
  for (int i = 0; i < count && error.ok(); ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
      error = absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
      break;
    }
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      error = absl::UnavailableError(absl::StrCat("bind: ", std::strerror(errno)));
      break;
    }
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) close(fd);
  if (!error.ok()) return error;
  return ports;
}

}  // namespace pstrain
