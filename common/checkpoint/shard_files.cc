#include "common/checkpoint/shard_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/checkpoint/crc32c.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoint shard files are little-endian float32, copied as is");

namespace pstrain {
namespace {

constexpr int64_t kMaxManifestBytes = int64_t{64} << 20;
// The largest block a reader takes unless one row of the tensor is larger (a writer makes
// them at most kShardBlockBytes): bounds a reader's buffer against a hostile manifest.
constexpr int64_t kMaxBlockBytes = int64_t{256} << 20;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

absl::Status DataLoss(const std::string& dir, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("checkpoint ", dir, ": ", why));
}

bool AllDigits(absl::string_view s) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// `object[key]` as an integer in [0, max], without wrapping.
bool GetCount(const nlohmann::json& object, const char* key, int64_t max, int64_t* out) {
  auto it = object.find(key);
  if (it == object.end()) return false;
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() > static_cast<uint64_t>(max)) return false;
  } else if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return false;
  }
  const int64_t v = it->get<int64_t>();
  if (v < 0 || v > max) return false;
  *out = v;
  return true;
}

bool GoodFileName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name.find('/') == std::string::npos &&
         name[0] != '.';
}

nlohmann::json ShapeJson(const std::vector<int64_t>& shape) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t d : shape) out.push_back(d);
  return out;
}

// pread of exactly `size` bytes. Errors: DATA_LOSS a short read or a failed one.
absl::Status ReadExactly(int fd, int64_t offset, char* data, int64_t size,
                         const std::string& path) {
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, data + done, static_cast<size_t>(size - done),
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::DataLossError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    if (n == 0) return absl::DataLossError(absl::StrCat(path, " is truncated"));
    done += n;
  }
  return absl::OkStatus();
}

}  // namespace

int64_t RowsOf(const std::vector<int64_t>& shape) { return shape.empty() ? 1 : shape[0]; }

int64_t RowElements(const std::vector<int64_t>& shape) {
  if (shape.size() <= 1) return 1;
  return NumElements(std::vector<int64_t>(shape.begin() + 1, shape.end()));
}

bool IsCommittedCheckpointName(absl::string_view name) {
  return absl::ConsumePrefix(&name, "ckpt-") && AllDigits(name);
}

bool IsTempCheckpointName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, ".tmp-ckpt-")) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
  if (parts.size() != 3) return false;
  for (absl::string_view p : parts) {
    if (!AllDigits(p)) return false;
  }
  return true;
}

std::string ShardFileName(int ps_index) { return absl::StrFormat("shard-%05d", ps_index); }

ShardFileWriter::ShardFileWriter(std::string dir, std::string name, int fd, int64_t block_bytes)
    : dir_(std::move(dir)),
      path_(absl::StrCat(dir_, "/", name)),
      fd_(fd),
      block_bytes_(std::max<int64_t>(block_bytes, 1)) {
  file_.name = std::move(name);
}

absl::StatusOr<std::unique_ptr<ShardFileWriter>> ShardFileWriter::Create(
    const std::string& dir, const std::string& name, int64_t block_bytes) {
  const std::string path = absl::StrCat(dir, "/", name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return ErrnoError("cannot create", path);
  return std::unique_ptr<ShardFileWriter>(new ShardFileWriter(dir, name, fd, block_bytes));
}

absl::Status ShardFileWriter::Add(const std::string& tensor, const std::vector<int64_t>& shape,
                                  int64_t row_begin, int64_t row_end, const Tensor& rows) {
  return Add(tensor, shape, row_begin, row_end,
             absl::MakeConstSpan(rows.data(), rows.num_elements()));
}

absl::Status ShardFileWriter::Add(const std::string& tensor, const std::vector<int64_t>& shape,
                                  int64_t row_begin, int64_t row_end,
                                  absl::Span<const float> rows) {
  const int64_t row_elements = RowElements(shape);
  if (row_begin < 0 || row_end <= row_begin || row_end > RowsOf(shape) || row_elements < 0 ||
      static_cast<int64_t>(rows.size()) != (row_end - row_begin) * row_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows [", row_begin, ", ", row_end, ") of ", tensor, " ", ShapeToString(shape),
        " do not match ", rows.size(), " values"));
  }
  const int64_t row_bytes = row_elements * static_cast<int64_t>(sizeof(float));
  const int64_t rows_per_block = std::max<int64_t>(1, row_bytes == 0 ? row_end - row_begin
                                                                      : block_bytes_ / row_bytes);
  ShardPiece piece;
  piece.tensor = tensor;
  piece.shape = shape;
  piece.row_begin = row_begin;
  piece.row_end = row_end;
  const char* data = reinterpret_cast<const char*>(rows.data());
  for (int64_t r = row_begin; r < row_end; r += rows_per_block) {
    ShardBlock block;
    block.row_begin = r;
    block.row_end = std::min(row_end, r + rows_per_block);
    block.offset = file_.length;
    block.length = (block.row_end - block.row_begin) * row_bytes;
    const char* bytes = data + (r - row_begin) * row_bytes;
    block.crc32c = Crc32c(bytes, static_cast<size_t>(block.length));
    PS_RETURN_IF_ERROR(WriteAll(fd_.get(), bytes, static_cast<size_t>(block.length), path_));
    file_.crc32c = Crc32cExtend(file_.crc32c, bytes, static_cast<size_t>(block.length));
    file_.length += block.length;
    piece.blocks.push_back(block);
  }
  file_.pieces.push_back(std::move(piece));
  return absl::OkStatus();
}

absl::StatusOr<ShardFile> ShardFileWriter::Finish(std::vector<ShardCounts> counts) {
  if (::fsync(fd_.get()) != 0) return ErrnoError("cannot fsync", path_);
  if (fd_.Close() != 0) return ErrnoError("cannot close", path_);
  PS_RETURN_IF_ERROR(FsyncPath(dir_));
  file_.counts = std::move(counts);
  return std::move(file_);
}

void AddShardFilesToManifest(const std::vector<ShardFile>& files, nlohmann::json* manifest) {
  nlohmann::json file_entries = nlohmann::json::array();
  // Pieces by tensor, in the order tensors first appear; each tensor's sorted by rows.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<const ShardPiece*, const std::string*>>> pieces;
  for (const ShardFile& f : files) {
    file_entries.push_back({{"name", f.name}, {"length", f.length}, {"crc32c", f.crc32c}});
    for (const ShardPiece& p : f.pieces) {
      auto& list = pieces[p.tensor];
      if (list.empty()) order.push_back(p.tensor);
      list.push_back({&p, &f.name});
    }
  }
  nlohmann::json tensors = nlohmann::json::array();
  for (const std::string& name : order) {
    auto& list = pieces[name];
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first->row_begin < b.first->row_begin;
    });
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [piece, file] : list) {
      nlohmann::json blocks = nlohmann::json::array();
      for (const ShardBlock& b : piece->blocks) {
        blocks.push_back({{"offset", b.offset},
                          {"length", b.length},
                          {"row_begin", b.row_begin},
                          {"row_end", b.row_end},
                          {"crc32c", b.crc32c}});
      }
      entries.push_back({{"file", *file},
                         {"row_begin", piece->row_begin},
                         {"row_end", piece->row_end},
                         {"blocks", std::move(blocks)}});
    }
    tensors.push_back({{"name", name},
                       {"dtype", "float32"},
                       {"shape", ShapeJson(list.front().first->shape)},
                       {"pieces", std::move(entries)}});
  }
  (*manifest)["files"] = std::move(file_entries);
  (*manifest)["tensors"] = std::move(tensors);
}

namespace {

// One "blocks" list of a piece of `tensor`, checked against the piece's rows and its
// file's length.
absl::Status ParseBlocks(const std::string& dir, const StoredTensor& tensor,
                         const nlohmann::json& entries, int64_t file_length,
                         StoredTensor::Piece* piece) {
  const int64_t row_bytes = RowElements(tensor.shape) * static_cast<int64_t>(sizeof(float));
  const int64_t max_block = std::max(kMaxBlockBytes, row_bytes);
  int64_t next_row = piece->row_begin;
  for (const nlohmann::json& b : entries) {
    ShardBlock block;
    int64_t crc = 0;
    if (!b.is_object() || !GetCount(b, "offset", kMax, &block.offset) ||
        !GetCount(b, "length", kMax, &block.length) ||
        !GetCount(b, "row_begin", kMax, &block.row_begin) ||
        !GetCount(b, "row_end", kMax, &block.row_end) ||
        !GetCount(b, "crc32c", std::numeric_limits<uint32_t>::max(), &crc)) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\" has a malformed block"));
    }
    block.crc32c = static_cast<uint32_t>(crc);
    if (block.row_begin != next_row || block.row_end <= block.row_begin ||
        block.row_end > piece->row_end) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name,
                                        "\": blocks leave a gap or overlap at row ", next_row));
    }
    // Rows are at most the tensor's, whose bytes fit an int64 (NumElements checked).
    if (block.length != (block.row_end - block.row_begin) * row_bytes || block.length > max_block) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\": a block of ",
                                        block.length, " bytes for rows [", block.row_begin, ", ",
                                        block.row_end, ")"));
    }
    if (block.offset > file_length || block.length > file_length - block.offset) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\": a block past the end of ",
                                        piece->file));
    }
    next_row = block.row_end;
    piece->blocks.push_back(block);
  }
  if (next_row != piece->row_end) {
    return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\": blocks end at row ",
                                      next_row, ", not ", piece->row_end));
  }
  return absl::OkStatus();
}

absl::StatusOr<StoredTensor> ParseTensor(const std::string& dir, const nlohmann::json& t,
                                         const ShardedManifest& manifest) {
  if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
      !t.contains("shape") || !t["shape"].is_array() || !t.contains("pieces") ||
      !t["pieces"].is_array()) {
    return DataLoss(dir, "manifest.json has a malformed tensor entry");
  }
  StoredTensor tensor;
  tensor.name = t["name"].get<std::string>();
  if (!t.contains("dtype") || !t["dtype"].is_string() || t["dtype"].get<std::string>() != "float32") {
    return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\" has an unsupported dtype"));
  }
  if (t["shape"].size() > 8) {
    return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\" has a bad shape"));
  }
  for (const nlohmann::json& d : t["shape"]) {
    const bool count = d.is_number_unsigned()
                           ? d.get<uint64_t>() <= static_cast<uint64_t>(kMax)
                           : d.is_number_integer() && d.get<int64_t>() >= 0;
    const int64_t dim = count ? d.get<int64_t>() : -1;
    if (dim < 0) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\" has a bad shape"));
    }
    tensor.shape.push_back(dim);
  }
  const int64_t elements = NumElements(tensor.shape);
  if (elements < 0 || elements > kMaxTensorElements) {
    return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\" has a bad shape"));
  }
  const int64_t rows = RowsOf(tensor.shape);
  int64_t next_row = 0;
  for (const nlohmann::json& p : t["pieces"]) {
    StoredTensor::Piece piece;
    if (!p.is_object() || !p.contains("file") || !p["file"].is_string() ||
        !GetCount(p, "row_begin", kMax, &piece.row_begin) ||
        !GetCount(p, "row_end", kMax, &piece.row_end) || !p.contains("blocks") ||
        !p["blocks"].is_array()) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\" has a malformed piece"));
    }
    piece.file = p["file"].get<std::string>();
    auto length = manifest.file_lengths.find(piece.file);
    if (length == manifest.file_lengths.end()) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\" names an unlisted file"));
    }
    if (piece.row_begin != next_row || piece.row_end <= piece.row_begin || piece.row_end > rows) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name,
                                        "\": pieces leave a gap or overlap at row ", next_row));
    }
    PS_RETURN_IF_ERROR(ParseBlocks(dir, tensor, p["blocks"], length->second, &piece));
    next_row = piece.row_end;
    tensor.pieces.push_back(std::move(piece));
  }
  if (next_row != rows && elements > 0) {
    return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\": pieces cover rows [0, ",
                                      next_row, ") of ", rows));
  }
  return tensor;
}

}  // namespace

absl::StatusOr<ShardedManifest> ParseShardedManifest(const nlohmann::json& json,
                                                     const std::string& dir) {
  if (!json.contains("files") || !json["files"].is_array() || !json.contains("tensors") ||
      !json["tensors"].is_array()) {
    return DataLoss(dir, "manifest.json lacks files or tensors");
  }
  ShardedManifest manifest;
  for (const nlohmann::json& f : json["files"]) {
    int64_t length = 0;
    int64_t crc = 0;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
        !GetCount(f, "length", kMax, &length) ||
        !GetCount(f, "crc32c", std::numeric_limits<uint32_t>::max(), &crc) ||
        !GoodFileName(f["name"].get<std::string>())) {
      return DataLoss(dir, "manifest.json has a malformed file entry");
    }
    const std::string name = f["name"].get<std::string>();
    if (!manifest.file_lengths.emplace(name, length).second) {
      return DataLoss(dir, absl::StrCat("file ", name, " listed twice"));
    }
    manifest.file_crcs[name] = static_cast<uint32_t>(crc);
  }
  for (const nlohmann::json& t : json["tensors"]) {
    PS_ASSIGN_OR_RETURN(StoredTensor tensor, ParseTensor(dir, t, manifest));
    if (!manifest.index.emplace(tensor.name, manifest.tensors.size()).second) {
      return DataLoss(dir, absl::StrCat("tensor \"", tensor.name, "\" listed twice"));
    }
    manifest.tensors.push_back(std::move(tensor));
  }
  return manifest;
}

absl::StatusOr<ShardedManifest> ReadShardedManifest(const std::string& dir, nlohmann::json* json) {
  const std::string path = absl::StrCat(dir, "/manifest.json");
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) {
    return DataLoss(dir, errno == ENOENT ? std::string("manifest.json is missing")
                                         : absl::StrCat("manifest.json: ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxManifestBytes) {
    return DataLoss(dir, "manifest.json is not a regular file of at most 64 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  PS_RETURN_IF_ERROR(ReadExactly(fd.get(), 0, text.data(), st.st_size, path));
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("format") ||
      parsed["format"] != "pstrain-checkpoint") {
    return DataLoss(dir, "manifest.json is not a pstrain checkpoint manifest");
  }
  if (!parsed.contains("version") || parsed["version"] != 2) {
    return DataLoss(dir, absl::StrCat("unsupported checkpoint format version ",
                                      parsed.contains("version") ? parsed["version"].dump().substr(0, 24)
                                                                   : "(none)",
                                      " (this reader takes sharded checkpoints, version 2)"));
  }
  PS_ASSIGN_OR_RETURN(ShardedManifest manifest, ParseShardedManifest(parsed, dir));
  if (json != nullptr) *json = std::move(parsed);
  return manifest;
}

absl::Status VisitTensorRows(
    const std::string& dir, const ShardedManifest& manifest, const StoredTensor& tensor,
    int64_t row_begin, int64_t row_end,
    absl::FunctionRef<absl::Status(int64_t first_row, absl::Span<const float> rows)> visit) {
  if (row_begin < 0 || row_end < row_begin || row_end > RowsOf(tensor.shape)) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", row_begin, ", ", row_end,
                                                   ") of tensor \"", tensor.name, "\" ",
                                                   ShapeToString(tensor.shape)));
  }
  const int64_t row_elements = RowElements(tensor.shape);
  const int64_t row_bytes = row_elements * static_cast<int64_t>(sizeof(float));
  std::vector<char> buffer;
  for (const StoredTensor::Piece& piece : tensor.pieces) {
    if (piece.row_end <= row_begin || piece.row_begin >= row_end) continue;
    const std::string path = absl::StrCat(dir, "/", piece.file);
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (fd.get() < 0) {
      return DataLoss(dir, absl::StrCat("shard file ", piece.file, " cannot be opened: ",
                                        std::strerror(errno)));
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size != manifest.file_lengths.at(piece.file)) {
      return DataLoss(dir, absl::StrCat("shard file ", piece.file, " is not the ",
                                        manifest.file_lengths.at(piece.file),
                                        " bytes the manifest says"));
    }
    for (const ShardBlock& block : piece.blocks) {
      if (block.row_end <= row_begin || block.row_begin >= row_end) continue;
      buffer.resize(static_cast<size_t>(block.length));
      PS_RETURN_IF_ERROR(ReadExactly(fd.get(), block.offset, buffer.data(), block.length, path));
      const uint32_t crc = Crc32c(buffer.data(), buffer.size());
      if (crc != block.crc32c) {
        return DataLoss(dir, absl::StrFormat("tensor \"%s\" rows [%d, %d) in %s fail their "
                                             "CRC-32C check (%08x, manifest says %08x)",
                                             tensor.name, block.row_begin, block.row_end,
                                             piece.file, crc, block.crc32c));
      }
      const int64_t first = std::max(row_begin, block.row_begin);
      const int64_t last = std::min(row_end, block.row_end);
      if (last > first && row_bytes > 0) {
        // The buffer is operator new's, aligned for floats, and rows start at multiples
        // of a whole row's bytes.
        const float* rows = reinterpret_cast<const float*>(buffer.data()) +
                            (first - block.row_begin) * row_elements;
        PS_RETURN_IF_ERROR(
            visit(first, absl::Span<const float>(rows, (last - first) * row_elements)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReadTensorRows(const std::string& dir, const ShardedManifest& manifest,
                            const StoredTensor& tensor, int64_t row_begin, int64_t row_end,
                            float* out) {
  const int64_t row_elements = RowElements(tensor.shape);
  return VisitTensorRows(dir, manifest, tensor, row_begin, row_end,
                         [&](int64_t first_row, absl::Span<const float> rows) {
                           std::memcpy(out + (first_row - row_begin) * row_elements, rows.data(),
                                       rows.size() * sizeof(float));
                           return absl::OkStatus();
                         });
}

absl::StatusOr<std::unique_ptr<ShardRowReader>> ShardRowReader::Open(
    const std::string& dir, const ShardedManifest& manifest, const std::string& name) {
  auto found = manifest.index.find(name);
  if (found == manifest.index.end()) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", dir, " has no tensor \"", name, "\""));
  }
  std::unique_ptr<ShardRowReader> reader(
      new ShardRowReader(dir, manifest.tensors[found->second]));
  const StoredTensor& tensor = reader->tensor_;
  std::vector<char> chunk;
  for (const StoredTensor::Piece& piece : tensor.pieces) {
    const std::string path = absl::StrCat(dir, "/", piece.file);
    auto fd = std::make_unique<FileDescriptor>(
        ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (fd->get() < 0) {
      return DataLoss(dir, absl::StrCat("shard file ", piece.file, " cannot be opened: ",
                                        std::strerror(errno)));
    }
    struct stat st;
    if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size != manifest.file_lengths.at(piece.file)) {
      return DataLoss(dir, absl::StrCat("shard file ", piece.file, " is not the ",
                                        manifest.file_lengths.at(piece.file),
                                        " bytes the manifest says"));
    }
    // Each block streamed through one bounded buffer: the whole tensor is verified with
    // no more than kVerifyChunkBytes held.
    for (const ShardBlock& block : piece.blocks) {
      uint32_t crc = 0;
      for (int64_t done = 0; done < block.length;) {
        const int64_t n = std::min(kVerifyChunkBytes, block.length - done);
        chunk.resize(static_cast<size_t>(n));
        PS_RETURN_IF_ERROR(ReadExactly(fd->get(), block.offset + done, chunk.data(), n, path));
        crc = Crc32cExtend(crc, chunk.data(), chunk.size());
        done += n;
      }
      if (crc != block.crc32c) {
        return DataLoss(dir, absl::StrFormat("tensor \"%s\" rows [%d, %d) in %s fail their "
                                             "CRC-32C check (%08x, manifest says %08x)",
                                             tensor.name, block.row_begin, block.row_end,
                                             piece.file, crc, block.crc32c));
      }
    }
    reader->files_.push_back(std::move(fd));
  }
  return reader;
}

absl::Status ShardRowReader::ReadRows(absl::Span<const int64_t> rows, float* out) const {
  const int64_t total = RowsOf(tensor_.shape);
  const int64_t row_bytes = RowElements(tensor_.shape) * static_cast<int64_t>(sizeof(float));
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t row = rows[i];
    if (row < 0 || row >= total) {
      return absl::InvalidArgumentError(absl::StrCat("row ", row, " of tensor \"", tensor_.name,
                                                     "\" ", ShapeToString(tensor_.shape)));
    }
    if (row_bytes == 0) continue;  // no bytes, and no blocks to find
    // The piece, then the block, that holds the row: both sorted by rows, covering all.
    auto piece = std::upper_bound(tensor_.pieces.begin(), tensor_.pieces.end(), row,
                                  [](int64_t r, const StoredTensor::Piece& p) {
                                    return r < p.row_begin;
                                  }) - 1;
    auto block = std::upper_bound(piece->blocks.begin(), piece->blocks.end(), row,
                                  [](int64_t r, const ShardBlock& b) { return r < b.row_begin; }) -
                 1;
    const size_t file = static_cast<size_t>(piece - tensor_.pieces.begin());
    PS_RETURN_IF_ERROR(ReadExactly(files_[file]->get(),
                                   block->offset + (row - block->row_begin) * row_bytes,
                                   reinterpret_cast<char*>(out) + i * row_bytes, row_bytes,
                                   absl::StrCat(dir_, "/", piece->file)));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
