#ifndef PSTRAIN_COMMON_CHECKPOINT_ZIP_ARCHIVE_H_
#define PSTRAIN_COMMON_CHECKPOINT_ZIP_ARCHIVE_H_

// Zip archives through Debian's libzip, for the Keras 3 `.keras` format (a zip of
// metadata.json, config.json and model.weights.h5). Members are stored uncompressed, as
// Keras's saving library writes them (Python's zipfile default).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {

struct ZipMember {
  std::string name;   // "config.json"
  std::string bytes;  // its contents
  // Writing only: when set, the member's contents are this file's (`bytes` unused), read
  // by libzip a buffer at a time (a weights file larger than memory).
  std::string source_file;
};

// Writes `members`, in order, as a zip archive at `path`, atomically: libzip writes a
// temporary file beside `path`, streaming each member from its bytes or its source file,
// which is fsynced and renamed over `path`.
// Errors: INVALID_ARGUMENT an empty or repeated member name; INTERNAL libzip or a
//         file-system call failed (named, with the path; a source file that cannot be
//         read too).
absl::Status WriteZipArchive(const std::string& path, const std::vector<ZipMember>& members);

// Reads every member of the zip archive at `path`, in archive order.
// Errors: NOT_FOUND no such file; INVALID_ARGUMENT not a zip archive, or a member that
//         cannot be read (named); RESOURCE_EXHAUSTED a member over `max_member_bytes`.
absl::StatusOr<std::vector<ZipMember>> ReadZipArchive(const std::string& path,
                                                      int64_t max_member_bytes);

// What the archive's central directory says of one member: enough to tell two copies of
// a file apart without reading either (a ps checks that the .keras file it can open is the
// one the chief named).
struct ZipMemberInfo {
  int64_t size = 0;    // uncompressed bytes
  uint32_t crc32 = 0;  // of the uncompressed bytes
};

// Errors: NOT_FOUND no such file, or no member `name`; INVALID_ARGUMENT not a zip archive.
absl::StatusOr<ZipMemberInfo> StatZipMember(const std::string& path, const std::string& name);

// Member `name` alone, without reading the others (a .keras file's config.json beside a
// weights file of gigabytes).
// Errors: as StatZipMember, and RESOURCE_EXHAUSTED a member over `max_bytes`;
//         INVALID_ARGUMENT a member that cannot be read.
absl::StatusOr<std::string> ReadZipMember(const std::string& path, const std::string& name,
                                          int64_t max_bytes);

// Copies member `name` into the file open at `fd` (from its offset), 1 MiB at a time,
// checking that it is `expected`'s size (libzip checks its CRC as it reads to the end).
// Errors: as StatZipMember; INVALID_ARGUMENT the member is not `expected` or cannot be
//         read; INTERNAL writing `fd` failed.
absl::Status ExtractZipMember(const std::string& path, const std::string& name,
                              const ZipMemberInfo& expected, int fd);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_ZIP_ARCHIVE_H_
