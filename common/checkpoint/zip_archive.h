#ifndef PSTRAIN_COMMON_CHECKPOINT_ZIP_ARCHIVE_H_
#define PSTRAIN_COMMON_CHECKPOINT_ZIP_ARCHIVE_H_

// Zip archives through Debian's libzip, for the Keras 3 `.keras` format (a zip of
// metadata.json, config.json and model.weights.h5). Members are stored uncompressed, as
// Keras's saving library writes them (Python's zipfile default).

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {

struct ZipMember {
  std::string name;   // "config.json"
  std::string bytes;  // its contents
};

// Writes `members`, in order, as a zip archive at `path`, atomically: the archive is built
// in memory, written to a temporary file beside `path`, fsynced and renamed over it.
// Errors: INVALID_ARGUMENT an empty or repeated member name; INTERNAL libzip or a
//         file-system call failed (named, with the path).
absl::Status WriteZipArchive(const std::string& path, const std::vector<ZipMember>& members);

// Reads every member of the zip archive at `path`, in archive order.
// Errors: NOT_FOUND no such file; INVALID_ARGUMENT not a zip archive, or a member that
//         cannot be read (named); RESOURCE_EXHAUSTED a member over `max_member_bytes`.
absl::StatusOr<std::vector<ZipMember>> ReadZipArchive(const std::string& path,
                                                      int64_t max_member_bytes);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_ZIP_ARCHIVE_H_
