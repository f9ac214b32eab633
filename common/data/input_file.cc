#include "common/data/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

absl::Status OpenError(const std::string& path, absl::string_view kind, int error) {
  if (error == ENOENT || error == ENOTDIR) {
    return absl::NotFoundError(absl::StrCat(kind, " ", path, " does not exist"));
  }
  const std::string why = absl::StrCat(kind, " ", path, " is unreadable: ", std::strerror(error));
  return error == EACCES || error == EPERM ? absl::PermissionDeniedError(why)
                                           : absl::InvalidArgumentError(why);
}

absl::Status CheckStat(const struct stat& st, const std::string& path, absl::string_view kind,
                       int64_t max_bytes, int64_t* size) {
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind, " ", path, " is not a regular file",
        S_ISDIR(st.st_mode) ? " (a directory)" : S_ISCHR(st.st_mode) ? " (a device)" : ""));
  }
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " ", path, " holds ", st.st_size,
                                                   " bytes, more than the ", max_bytes,
                                                   " this reader takes"));
  }
  *size = st.st_size;
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckInputFile(const std::string& path, absl::string_view kind, int64_t max_bytes,
                            int64_t* size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return OpenError(path, kind, errno);
  if (absl::Status checked = CheckStat(st, path, kind, max_bytes, size); !checked.ok()) {
    return checked;
  }
  if (::access(path.c_str(), R_OK) != 0) return OpenError(path, kind, errno);
  return absl::OkStatus();
}

absl::StatusOr<InputFile> OpenInputFile(const std::string& path, absl::string_view kind,
                                        int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return OpenError(path, kind, errno);
  struct stat st;
  InputFile input;
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return OpenError(path, kind, error);
  }
  if (absl::Status checked = CheckStat(st, path, kind, max_bytes, &input.size); !checked.ok()) {
    ::close(fd);
    return checked;
  }
  // Regular files never block; reads go back to blocking for clarity.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  input.file.reset(::fdopen(fd, "rb"));
  if (input.file == nullptr) {
    const int error = errno;
    ::close(fd);
    return OpenError(path, kind, error);
  }
  return input;
}

}  // namespace pstrain
