#include "common/unprivileged.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pstrain {
namespace {

// Drops the capabilities that let root ignore file permissions (from the effective and
// permitted sets, so they cannot come back). Works where changing user does not, as in
// a sandbox's user namespace that maps no other user.
bool DropFilePermissionOverrides() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}) {
    data[cap / 32].effective &= ~(1u << (cap % 32));
    data[cap / 32].permitted &= ~(1u << (cap % 32));
  }
  return ::syscall(SYS_capset, &header, data) == 0;
}

}  // namespace

int RunUnprivileged(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!DropFilePermissionOverrides()) ::_exit(254);
    ::_exit(body() & 0xff);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) == 254) {
    return -1;
  }
  return WEXITSTATUS(status);
}

}  // namespace pstrain
