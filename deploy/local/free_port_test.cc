#include "deploy/local/free_port.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Whether this process can listen on 127.0.0.1:`port` (as a daemon would).
bool CanListenOn(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  listen(fd, 1) == 0;
  close(fd);
  return ok;
}

// Whether the reservation of `port` is held: the lock on its byte of the lock file, asked
// through an open of the file of its own, which conflicts with every other open (this
// process's PickFreePorts included).
bool Reserved(int port) {
  const int fd = open(PortReservationLockFile().c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  if (fd < 0) return false;
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = port;
  lock.l_len = 1;
  const bool taken = fcntl(fd, F_OFD_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
  close(fd);
  return taken;
}

TEST(FreePortTest, PortsAreDistinctFreeAndOutsideTheEphemeralRange) {
  const auto [first, last] = EphemeralPortRange();
  ASSERT_LE(first, last);
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(64);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 64u);
  EXPECT_EQ(std::set<int>(ports->begin(), ports->end()).size(), 64u);
  for (int port : *ports) {
    EXPECT_GE(port, 10000);
    EXPECT_LE(port, 65535);
    EXPECT_TRUE(port < first || port > last) << port << " is in the ephemeral range";
    EXPECT_TRUE(CanListenOn(port)) << port;
  }
}

TEST(FreePortTest, AProcessNeverGetsAPortItHoldsAgain) {
  absl::StatusOr<std::vector<int>> a = PickFreePorts(100);
  absl::StatusOr<std::vector<int>> b = PickFreePorts(100);
  ASSERT_TRUE(a.ok() && b.ok());
  std::set<int> all(a->begin(), a->end());
  all.insert(b->begin(), b->end());
  EXPECT_EQ(all.size(), 200u);
}

// Four processes pick ports at the same moment, each holding what it got until all are
// done, as parallel tests do: no port is given twice, every one is reserved while held
// (here and in the parent's view) and free again once its process has exited.
TEST(FreePortTest, ProcessesPickingAtOnceNeverShareAPort) {
  absl::StatusOr<std::vector<int>> parents = PickFreePorts(10);  // held by this process
  ASSERT_TRUE(parents.ok()) << parents.status();
  constexpr int kChildren = 4;
  constexpr int kBatches = 100;
  constexpr int kPerBatch = 5;  // a five-task cluster at a time
  int go[2], release[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(release), 0);
  std::vector<pid_t> children;
  std::vector<int> results;
  for (int c = 0; c < kChildren; ++c) {
    int result[2];
    ASSERT_EQ(pipe(result), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      close(release[1]);
      close(result[0]);
      char byte;
      if (read(go[0], &byte, 1) != 0) _exit(3);  // all start when the parent closes it
      std::vector<int> mine;
      for (int b = 0; b < kBatches; ++b) {
        absl::StatusOr<std::vector<int>> ports = PickFreePorts(kPerBatch);
        if (!ports.ok()) _exit(1);
        mine.insert(mine.end(), ports->begin(), ports->end());
      }
      const ssize_t bytes = static_cast<ssize_t>(mine.size() * sizeof(int));
      if (write(result[1], mine.data(), bytes) != bytes) _exit(2);
      close(result[1]);
      while (read(release[0], &byte, 1) > 0) {
      }  // holds its ports until the parent has checked them
      _exit(0);
    }
    close(result[1]);
    children.push_back(pid);
    results.push_back(result[0]);
  }
  close(go[0]);
  close(release[0]);
  close(go[1]);  // go
  std::set<int> given(parents->begin(), parents->end());
  std::vector<int> childrens;
  for (int fd : results) {
    std::vector<int> ports(kBatches * kPerBatch);
    const ssize_t want = static_cast<ssize_t>(ports.size() * sizeof(int));
    ssize_t got = 0;
    while (got < want) {
      const ssize_t n = read(fd, reinterpret_cast<char*>(ports.data()) + got, want - got);
      if (n <= 0) break;
      got += n;
    }
    close(fd);
    EXPECT_EQ(got, want) << "a child could not pick its ports";
    for (int port : ports) {
      EXPECT_TRUE(given.insert(port).second) << "port " << port << " given twice";
      EXPECT_TRUE(Reserved(port)) << port;
      childrens.push_back(port);
    }
  }
  close(release[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  // A process's reservations end with it (ports picked in the meantime by a test running
  // beside this one aside: those are held by that process, so count the ones now free).
  int released = 0;
  for (int port : childrens) released += Reserved(port) ? 0 : 1;
  EXPECT_GT(released, static_cast<int>(childrens.size()) * 9 / 10);
  for (int port : *parents) EXPECT_TRUE(Reserved(port)) << "this process's own";
}

}  // namespace
}  // namespace pstrain
