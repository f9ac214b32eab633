#include "common/checkpoint/zip_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/durable_file.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

std::string ZipErrorText(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

// The archive written by libzip to `temp` (which zip_close writes beside it and renames
// into place): each member from its bytes or from its source file, streamed by libzip a
// buffer at a time, so a member of gigabytes is never held.
absl::Status WriteWithLibzip(const std::string& temp, const std::vector<ZipMember>& members) {
  int code = 0;
  zip_t* archive = zip_open(temp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (archive == nullptr) {
    return absl::InternalError(
        absl::StrCat("libzip: cannot create ", temp, ": ", ZipErrorText(code)));
  }
  auto fail = [&](const std::string& what) {
    const std::string text = zip_strerror(archive);
    zip_discard(archive);
    return absl::InternalError(absl::StrCat("libzip: ", what, ": ", text));
  };
  for (const ZipMember& member : members) {
    // libzip reads the bytes (or the file) at zip_close; `members` outlives it.
    zip_source_t* data =
        member.source_file.empty()
            ? zip_source_buffer(archive, member.bytes.data(), member.bytes.size(), 0)
            : zip_source_file(archive, member.source_file.c_str(), 0, 0);
    if (data == nullptr) return fail(absl::StrCat("cannot add ", member.name));
    const zip_int64_t index =
        zip_file_add(archive, member.name.c_str(), data, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(data);
      return fail(absl::StrCat("cannot add ", member.name));
    }
    if (zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) != 0) {
      return fail(absl::StrCat("cannot store ", member.name));
    }
  }
  if (zip_close(archive) != 0) return fail(absl::StrCat("cannot write ", temp));
  return absl::OkStatus();
}

// An archive open for reading, closed (discarded: nothing is written) on scope exit.
class ReadArchive {
 public:
  ~ReadArchive() {
    if (archive_ != nullptr) zip_discard(archive_);
  }
  absl::Status Open(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("no file ", path));
    int code = 0;
    archive_ = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (archive_ == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is not a zip archive: ", ZipErrorText(code)));
    }
    return absl::OkStatus();
  }
  // The member's index and size.
  absl::StatusOr<std::pair<zip_uint64_t, ZipMemberInfo>> Find(const std::string& path,
                                                              const std::string& name) {
    const zip_int64_t index = zip_name_locate(archive_, name.c_str(), 0);
    zip_stat_t info;
    zip_stat_init(&info);
    if (index < 0) return absl::NotFoundError(absl::StrCat(path, ": no member ", name));
    if (zip_stat_index(archive_, static_cast<zip_uint64_t>(index), 0, &info) != 0 ||
        !(info.valid & ZIP_STAT_SIZE) || !(info.valid & ZIP_STAT_CRC) ||
        info.size > static_cast<zip_uint64_t>(INT64_MAX)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": member ", name, " is unreadable"));
    }
    return std::make_pair(static_cast<zip_uint64_t>(index),
                          ZipMemberInfo{static_cast<int64_t>(info.size), info.crc});
  }
  zip_t* get() const { return archive_; }

 private:
  zip_t* archive_ = nullptr;
};

}  // namespace

absl::StatusOr<ZipMemberInfo> StatZipMember(const std::string& path, const std::string& name) {
  ReadArchive archive;
  PS_RETURN_IF_ERROR(archive.Open(path));
  PS_ASSIGN_OR_RETURN(auto found, archive.Find(path, name));
  return found.second;
}

absl::StatusOr<std::string> ReadZipMember(const std::string& path, const std::string& name,
                                          int64_t max_bytes) {
  ReadArchive archive;
  PS_RETURN_IF_ERROR(archive.Open(path));
  PS_ASSIGN_OR_RETURN(auto found, archive.Find(path, name));
  const int64_t size = found.second.size;
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": member ", name, " has ", size, " bytes, over the limit of ", max_bytes));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  zip_file_t* file = zip_fopen_index(archive.get(), found.first, 0);
  const bool read =
      file != nullptr && zip_fread(file, bytes.data(), bytes.size()) == static_cast<zip_int64_t>(size);
  if (file != nullptr) zip_fclose(file);
  if (!read) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": member ", name, " cannot be read: ", zip_strerror(archive.get())));
  }
  return bytes;
}

absl::Status ExtractZipMember(const std::string& path, const std::string& name,
                              const ZipMemberInfo& expected, int fd) {
  ReadArchive archive;
  PS_RETURN_IF_ERROR(archive.Open(path));
  PS_ASSIGN_OR_RETURN(auto found, archive.Find(path, name));
  if (found.second.size != expected.size || found.second.crc32 != expected.crc32) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": member ", name, " is not the one expected"));
  }
  zip_file_t* file = zip_fopen_index(archive.get(), found.first, 0);
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": member ", name, " cannot be read: ", zip_strerror(archive.get())));
  }
  std::string block(size_t{1} << 20, '\0');
  int64_t copied = 0;
  absl::Status status;
  while (status.ok()) {
    const zip_int64_t n = zip_fread(file, block.data(), block.size());
    if (n < 0) {
      status = absl::InvalidArgumentError(absl::StrCat(path, ": member ", name,
                                                       " cannot be read: ", zip_file_strerror(file)));
      break;
    }
    if (n == 0) break;
    copied += n;
    if (copied > expected.size) {
      status = absl::InvalidArgumentError(absl::StrCat(path, ": member ", name, " is longer than it says"));
      break;
    }
    for (zip_int64_t done = 0; done < n;) {
      const ssize_t w = ::write(fd, block.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        status = ErrnoError("cannot write the extracted", name);
        break;
      }
      done += w;
    }
  }
  zip_fclose(file);
  if (status.ok() && copied != expected.size) {
    status = absl::InvalidArgumentError(absl::StrCat(path, ": member ", name, " is shorter than it says"));
  }
  return status;
}

absl::Status WriteZipArchive(const std::string& path, const std::vector<ZipMember>& members) {
  std::set<std::string> names;
  for (const ZipMember& member : members) {
    if (member.name.empty() || !names.insert(member.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("zip member name \"", member.name, "\" is empty or repeated"));
    }
  }
  const std::string temp = absl::StrCat(path, ".tmp-", ::getpid());
  absl::Status written = WriteWithLibzip(temp, members);
  if (written.ok()) written = FsyncPath(temp);
  if (written.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = ErrnoError("cannot rename to", path);
  }
  if (!written.ok()) {
    ::unlink(temp.c_str());
    return written;
  }
  const size_t slash = path.rfind('/');
  return FsyncPath(slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash)));
}

absl::StatusOr<std::vector<ZipMember>> ReadZipArchive(const std::string& path,
                                                      int64_t max_member_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("no file ", path));
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (archive == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a zip archive: ", ZipErrorText(code)));
  }
  std::vector<ZipMember> members;
  absl::Status status;
  const zip_int64_t count = zip_get_num_entries(archive, 0);
  for (zip_int64_t i = 0; i < count && status.ok(); ++i) {
    zip_stat_t info;
    zip_stat_init(&info);
    if (zip_stat_index(archive, i, 0, &info) != 0 || !(info.valid & ZIP_STAT_NAME) ||
        !(info.valid & ZIP_STAT_SIZE)) {
      status = absl::InvalidArgumentError(absl::StrCat(path, ": member ", i, " is unreadable"));
      break;
    }
    if (info.size > static_cast<zip_uint64_t>(max_member_bytes)) {
      status = absl::ResourceExhaustedError(absl::StrCat(
          path, ": member ", info.name, " has ", info.size, " bytes, over the limit of ",
          max_member_bytes));
      break;
    }
    ZipMember member{info.name, std::string(info.size, '\0')};
    zip_file_t* file = zip_fopen_index(archive, i, 0);
    const bool read = file != nullptr &&
                      zip_fread(file, member.bytes.data(), info.size) ==
                          static_cast<zip_int64_t>(info.size);
    if (file != nullptr) zip_fclose(file);
    if (!read) {
      status = absl::InvalidArgumentError(
          absl::StrCat(path, ": member ", info.name, " cannot be read: ", zip_strerror(archive)));
      break;
    }
    members.push_back(std::move(member));
  }
  zip_discard(archive);
  if (!status.ok()) return status;
  return members;
}

}  // namespace pstrain
