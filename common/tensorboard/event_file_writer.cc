#include "common/tensorboard/event_file_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint/crc32c.h"
#include "common/tensorboard/event.pb.h"

namespace pstrain {
namespace {

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// mkdir -p. Errors: INTERNAL naming the folder that could not be made.
absl::Status MakeDirectories(const std::string& dir) {
  std::string path;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    if (path.empty() && dir[0] == '/') path = "/";
    if (part.empty()) continue;
    absl::StrAppend(&path, path.empty() || path.back() == '/' ? "" : "/", part);
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string FrameTfRecord(absl::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  AppendLittleEndian(data.size(), 8, &record);
  AppendLittleEndian(MaskCrc32c(Crc32c(record.data(), 8)), 4, &record);
  record.append(data.data(), data.size());
  AppendLittleEndian(MaskCrc32c(Crc32c(data)), 4, &record);
  return record;
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir) {
  if (absl::Status made = MakeDirectories(dir); !made.ok()) return made;
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  // Two writers of one process in one second still get two files.
  static std::atomic<int> sequence{0};
  const absl::Time now = absl::Now();
  const std::string path =
      absl::StrCat(dir, "/events.out.tfevents.", absl::ToUnixSeconds(now), ".", host, ".",
                   getpid(), ".", sequence++, ".v2");
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, file));
  tensorboard::Event version;
  version.set_wall_time(absl::ToDoubleSeconds(now - absl::UnixEpoch()));
  version.set_file_version("brain.Event:2");
  version.mutable_source_metadata()->set_writer("pstrain");
  absl::MutexLock lock(&writer->mu_);
  if (absl::Status written = writer->WriteRecord(version.SerializeAsString()); !written.ok()) {
    return written;
  }
  return writer;
}

EventFileWriter::~EventFileWriter() {
  absl::MutexLock lock(&mu_);
  std::fclose(file_);
}

absl::Status EventFileWriter::WriteScalars(
    int64_t step, const std::vector<std::pair<std::string, double>>& scalars,
    absl::Time wall_time) {
  tensorboard::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(wall_time - absl::UnixEpoch()));
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  absl::MutexLock lock(&mu_);
  return WriteRecord(event.SerializeAsString());
}

absl::Status EventFileWriter::WriteRecord(const std::string& event) {
  const std::string record = FrameTfRecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fflush(file_) != 0) {
    const std::string error = strerror(errno);
    std::clearerr(file_);
    return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", error));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
