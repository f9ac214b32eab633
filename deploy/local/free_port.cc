#include "deploy/local/free_port.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace pstrain {

namespace {

// Below this lie many well-known services (databases, web servers, 8080, 9090, ...).
constexpr int kLowestPort = 10000;
constexpr int kHighestPort = 65535;

// Whether nothing is bound to `port` on any address: a bind of [::]:port that also
// covers IPv4 (dual-stack), so that it conflicts with a socket on 127.0.0.1, 0.0.0.0,
// ::1 or :: alike; without IPv6, 127.0.0.1 alone. No SO_REUSEADDR, so a port that still
// has connections in TIME_WAIT counts as taken too (the cautious answer).
bool PortIsFree(int port) {
  const int fd6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd6 >= 0) {
    const int off = 0;
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    if (setsockopt(fd6, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) == 0) {
      const bool bound = bind(fd6, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      const int error = errno;
      close(fd6);
      if (bound) return true;
      if (error != EADDRNOTAVAIL && error != EAFNOSUPPORT) return false;
      // No IPv6 on this machine after all: ask IPv4.
    } else {
      close(fd6);
    }
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return bound;
}

// Opens (creating it if need be, readable and writable by every user) the lock file.
// Without O_CREAT first: with fs.protected_regular, an O_CREAT open of another user's
// file in /tmp is refused even when its mode allows writing.
int OpenLockFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fchmod(fd, 0666);  // whatever the umask: other users reserve ports here too
    } else if (errno == EEXIST) {
      fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    }
  }
  return fd;
}

// An exclusive lock on byte `port` of the lock file: an open-file-description lock, so
// it conflicts with every other open of the file (another process, or a forked child that
// opened its own), is not shared with children after exec (the fd is O_CLOEXEC), and is
// released when the process exits, however it exits.
bool LockPort(int fd, int port) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = port;
  lock.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

void UnlockPort(int fd, int port) {
  struct flock lock {};
  lock.l_type = F_UNLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = port;
  lock.l_len = 1;
  fcntl(fd, F_OFD_SETLK, &lock);
}

// This process's reservations.
struct Reservations {
  absl::Mutex mu;
  // The process that opened lock_fd: a forked child opens the file again, so that its
  // locks are its own and conflict with its parent's.
  pid_t owner ABSL_GUARDED_BY(mu) = -1;
  int lock_fd ABSL_GUARDED_BY(mu) = -1;
  // Ports this process holds (locks on one open file never conflict with each other).
  std::set<int> held ABSL_GUARDED_BY(mu);
};

Reservations& ThisProcess() {
  static Reservations* reservations = new Reservations;
  return *reservations;
}

}  // namespace

std::string PortReservationLockFile() {
  const char* path = std::getenv("PSTRAIN_PORT_LOCK_FILE");
  return path != nullptr && *path != '\0' ? path : "/tmp/pstrain-ports.lock";
}

std::pair<int, int> EphemeralPortRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0, last = 0;
  if (in >> first >> last && 0 < first && first <= last && last <= kHighestPort) {
    return {first, last};
  }
  return {32768, 60999};
}

absl::StatusOr<std::vector<int>> PickFreePorts(int count) {
  const auto [ephemeral_first, ephemeral_last] = EphemeralPortRange();
  std::vector<int> candidates;
  for (int port = kLowestPort; port <= kHighestPort; ++port) {
    if (port < ephemeral_first || port > ephemeral_last) candidates.push_back(port);
  }
  if (candidates.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no port in ", kLowestPort, "-", kHighestPort, " lies outside the ephemeral range ",
        ephemeral_first, "-", ephemeral_last, " (/proc/sys/net/ipv4/ip_local_port_range)"));
  }

  Reservations& reservations = ThisProcess();
  absl::MutexLock lock(&reservations.mu);
  if (reservations.owner != getpid()) {
    // First call, or the first in a forked child: the parent's locks stay the parent's.
    if (reservations.lock_fd >= 0) close(reservations.lock_fd);
    reservations.held.clear();
    reservations.lock_fd = OpenLockFile(PortReservationLockFile());
    if (reservations.lock_fd < 0) {
      return absl::UnavailableError(absl::StrCat("cannot open the port lock file ",
                                                 PortReservationLockFile(), ": ",
                                                 std::strerror(errno),
                                                 " (PSTRAIN_PORT_LOCK_FILE names another)"));
    }
    reservations.owner = getpid();
  }

  // From a random place in the candidates, so that processes picking at once rarely try
  // the same ports first.
  std::mt19937_64 random(static_cast<uint64_t>(getpid()) * 1000003u ^
                         static_cast<uint64_t>(absl::GetCurrentTimeNanos()));
  const size_t start = random() % candidates.size();
  std::vector<int> ports;
  for (size_t k = 0; k < candidates.size() && static_cast<int>(ports.size()) < count; ++k) {
    const int port = candidates[(start + k) % candidates.size()];
    if (reservations.held.count(port) > 0) continue;
    if (!LockPort(reservations.lock_fd, port)) continue;  // another process's
    if (!PortIsFree(port)) {
      UnlockPort(reservations.lock_fd, port);
      continue;
    }
    ports.push_back(port);
  }
  if (static_cast<int>(ports.size()) < count) {
    for (int port : ports) UnlockPort(reservations.lock_fd, port);
    return absl::UnavailableError(absl::StrCat("only ", ports.size(), " of ", count,
                                               " ports asked for are free outside the "
                                               "ephemeral range ",
                                               ephemeral_first, "-", ephemeral_last));
  }
  reservations.held.insert(ports.begin(), ports.end());
  return ports;
}

}  // namespace pstrain
