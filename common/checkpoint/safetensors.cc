#include "common/checkpoint/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/durable_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian float32, copied as is");

namespace pstrain {

namespace {

// The rows a safetensors export reads and writes at once (one row when a row is larger).
constexpr int64_t kSafetensorsBlockBytes = int64_t{16} << 20;

}  // namespace

std::vector<std::string> ModelVariableNames(const CheckpointReader& checkpoint) {
  std::vector<std::string> names;
  const nlohmann::json& metadata = checkpoint.metadata();
  const bool listed = metadata.contains("variables") && metadata["variables"].is_object();
  for (const std::string& name : checkpoint.TensorNames()) {
    const bool is_variable =
        listed ? metadata["variables"].contains(name) : !absl::StrContains(name, "/optimizer/");
    if (is_variable) names.push_back(name);
  }
  return names;
}

absl::Status WriteSafetensors(const CheckpointReader& checkpoint,
                              const std::vector<std::string>& names,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& out_path) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
  std::set<std::string> seen;
  int64_t offset = 0;
  for (const std::string& name : names) {
    if (name == "__metadata__" || !seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot export tensor name \"", name, "\" (reserved or repeated)"));
    }
    // The header first, from the shapes alone: the data follows tensor by tensor.
    PS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, checkpoint.Shape(name));
    const int64_t bytes = NumElements(shape) * static_cast<int64_t>(sizeof(float));
    header[name] = {
        {"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    tensors.emplace_back(name, std::move(shape));
  }
  std::string text = header.dump();
  // The data must start 8-byte aligned (8 bytes of length + header); the format pads the
  // header with trailing spaces.
  while (text.size() % 8 != 0) text.push_back(' ');
  unsigned char length[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(n >> (8 * i));

  const std::string temp = absl::StrCat(out_path, ".tmp-", ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", temp);
  absl::Status written = [&]() -> absl::Status {
    PS_RETURN_IF_ERROR(WriteAll(fd, length, sizeof(length), temp));
    PS_RETURN_IF_ERROR(WriteAll(fd, text.data(), text.size(), temp));
    // Each tensor streamed in blocks of rows (one block held at a time), so a table of a
    // sharded checkpoint never has to fit in memory.
    std::vector<float> block;
    for (const auto& [name, shape] : tensors) {
      if (NumElements(shape) == 0) continue;
      const int64_t rows = RowsOf(shape);
      const int64_t row = RowElements(shape);
      const int64_t step = std::max<int64_t>(
          1, kSafetensorsBlockBytes / std::max<int64_t>(1, row * sizeof(float)));
      for (int64_t begin = 0; begin < rows; begin += step) {
        const int64_t end = std::min(rows, begin + step);
        block.resize(static_cast<size_t>((end - begin) * row));
        PS_RETURN_IF_ERROR(checkpoint.ReadRows(name, begin, end, block.data()));
        PS_RETURN_IF_ERROR(WriteAll(fd, block.data(), block.size() * sizeof(float), temp));
      }
    }
    if (::fsync(fd) != 0) return ErrnoError("cannot fsync", temp);
    return absl::OkStatus();
  }();
  if (::close(fd) != 0 && written.ok()) written = ErrnoError("cannot close", temp);
  if (written.ok() && ::rename(temp.c_str(), out_path.c_str()) != 0) {
    written = ErrnoError("cannot rename to", out_path);
  }
  if (!written.ok()) ::unlink(temp.c_str());
  return written;
}

namespace {

absl::Status Malformed(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("safetensors: ", why));
}

// A header number as a non-negative int64 (nlohmann keeps big ones as unsigned).
bool ReadCount(const nlohmann::json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(v.get<uint64_t>());
    return true;
  }
  if (!v.is_number_integer() || v.get<int64_t>() < 0) return false;
  *out = v.get<int64_t>();
  return true;
}

}  // namespace

absl::StatusOr<SafetensorsFile> ParseSafetensors(absl::string_view bytes) {
  if (bytes.size() < 8) return Malformed("shorter than its 8-byte header length");
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) {
    header_length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  if (header_length > bytes.size() - 8) {
    return Malformed(absl::StrCat("header length ", header_length, " runs past the ",
                                  bytes.size(), "-byte file"));
  }
  const nlohmann::json header = nlohmann::json::parse(
      bytes.substr(8, header_length), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return Malformed("the header is not a JSON object");
  }
  const absl::string_view data = bytes.substr(8 + header_length);
  struct Entry {
    int64_t begin;
    int64_t end;
    std::string name;
    std::vector<int64_t> shape;
  };
  std::vector<Entry> entries;
  SafetensorsFile file;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (it.key() == "__metadata__") {
      if (!v.is_object()) return Malformed("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return Malformed("a __metadata__ value is not a string");
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = absl::StrCat("tensor \"", it.key(), "\"");
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets") || !v["shape"].is_array() ||
        !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
      return Malformed(absl::StrCat(what, " lacks dtype, shape or data_offsets"));
    }
    if (v["dtype"] != "F32") {
      return Malformed(absl::StrCat(what, " has dtype ", v["dtype"].dump(), " (only F32 is read)"));
    }
    Entry entry;
    entry.name = it.key();
    for (const nlohmann::json& d : v["shape"]) {
      int64_t dim;
      if (!ReadCount(d, &dim)) return Malformed(absl::StrCat(what, " has a bad shape"));
      entry.shape.push_back(dim);
    }
    if (!ReadCount(v["data_offsets"][0], &entry.begin) ||
        !ReadCount(v["data_offsets"][1], &entry.end) || entry.end < entry.begin ||
        entry.end > static_cast<int64_t>(data.size())) {
      return Malformed(absl::StrCat(what, " has data_offsets outside the ", data.size(),
                                    " bytes of data"));
    }
    const int64_t elements = NumElements(entry.shape);
    if (elements < 0 || elements > kMaxTensorElements ||
        entry.end - entry.begin != elements * static_cast<int64_t>(sizeof(float))) {
      return Malformed(absl::StrCat(what, " has ", entry.end - entry.begin,
                                    " bytes for shape ", ShapeToString(entry.shape)));
    }
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  int64_t next = 0;
  for (const Entry& e : entries) {
    if (e.begin != next) {
      return Malformed(absl::StrCat("tensor \"", e.name, "\" starts at byte ", e.begin,
                                    " of the data, not ", next, " (an overlap or a hole)"));
    }
    next = e.end;
  }
  if (next != static_cast<int64_t>(data.size())) {
    return Malformed(absl::StrCat("the tensors cover ", next, " of the ", data.size(),
                                  " bytes of data"));
  }
  for (Entry& e : entries) {
    std::vector<float> values(static_cast<size_t>((e.end - e.begin) / 4));
    if (!values.empty()) std::memcpy(values.data(), data.data() + e.begin, e.end - e.begin);
    file.tensors.push_back({std::move(e.name), Tensor(std::move(e.shape), std::move(values))});
  }
  return file;
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string why = absl::StrCat("cannot read ", path, ": ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(why);
    return error == EACCES ? absl::PermissionDeniedError(why) : absl::InternalError(why);
  }
  FileDescriptor closer(fd);
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read", path);
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  absl::StatusOr<SafetensorsFile> file = ParseSafetensors(bytes);
  if (!file.ok()) {
    return absl::Status(file.status().code(), absl::StrCat(path, ": ", file.status().message()));
  }
  return file;
}

}  // namespace pstrain
