#ifndef PSTRAIN_COMMON_DATA_INPUT_FILE_H_
#define PSTRAIN_COMMON_DATA_INPUT_FILE_H_

// Opening a data file with errors that say what is wrong with it: missing, unreadable
// (permissions), not a regular file (a directory, /dev/zero: refused before a single byte
// is read), or larger than its reader takes.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

struct InputFile {
  UniqueFile file;
  int64_t size = 0;  // bytes on disk
};

// Opens `path` for reading. `kind` starts every message ("CSV file").
// Errors: NOT_FOUND it does not exist; PERMISSION_DENIED it exists but cannot be read;
//         INVALID_ARGUMENT not a regular file, or more than `max_bytes` bytes.
absl::StatusOr<InputFile> OpenInputFile(const std::string& path, absl::string_view kind,
                                        int64_t max_bytes);

// The same checks for a reader that opens the file itself (zlib): OK when `path` is a
// readable regular file of at most `max_bytes`; its size in `size`.
absl::Status CheckInputFile(const std::string& path, absl::string_view kind, int64_t max_bytes,
                            int64_t* size);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_INPUT_FILE_H_
