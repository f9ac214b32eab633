#include "common/checkpoint/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

int FileDescriptor::Close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

absl::Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status FsyncPath(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("cannot open", path);
  if (::fsync(fd.get()) != 0) return ErrnoError("cannot fsync", path);
  return absl::OkStatus();
}

absl::Status WriteFileDurably(const std::string& path, const std::string& text) {
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoError("cannot create", path);
  PS_RETURN_IF_ERROR(WriteAll(fd.get(), text.data(), text.size(), path));
  if (::fsync(fd.get()) != 0) return ErrnoError("cannot fsync", path);
  if (fd.Close() != 0) return ErrnoError("cannot close", path);
  return absl::OkStatus();
}

}  // namespace pstrain
