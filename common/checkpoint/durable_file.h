#ifndef PSTRAIN_COMMON_CHECKPOINT_DURABLE_FILE_H_
#define PSTRAIN_COMMON_CHECKPOINT_DURABLE_FILE_H_

// The POSIX file steps a crash-safe write is made of (write fully, fsync, close and see
// its error, rename), shared by the checkpoint writer and the safetensors export.

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace pstrain {

// INTERNAL "<what> <path>: <strerror(errno)>".
absl::Status ErrnoError(const std::string& what, const std::string& path);

// An open file descriptor, closed on scope exit so error paths can return early.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now, so that a failing close (a delayed write error) is reported: 0 or -1.
  int Close();

 private:
  int fd_;
};

// Writes all `size` bytes, retrying short writes and EINTR. Errors: INTERNAL naming `path`.
absl::Status WriteAll(int fd, const void* data, size_t size, const std::string& path);

// fsyncs a file or directory by path (a directory after a rename inside it).
absl::Status FsyncPath(const std::string& path);

// Writes `text` to a new file at `path`, fsyncs and closes it.
absl::Status WriteFileDurably(const std::string& path, const std::string& text);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_DURABLE_FILE_H_
