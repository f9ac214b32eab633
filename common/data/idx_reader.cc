#include "common/data/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/data/input_file.h"
#include "common/memory_budget.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
constexpr size_t kChunkBytes = 1 << 20;

absl::Status Problem(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("IDX file ", path, ": ", message));
}

// One file, gzip or raw, read front to back. zlib's gzread passes raw files through
// unchanged, so both go through one gzFile; for raw files the size on disk is also known.
class IdxInput {
 public:
  static absl::StatusOr<std::unique_ptr<IdxInput>> Open(const std::string& path) {
    // Missing, unreadable and not-a-regular-file are told apart before zlib opens it.
    int64_t size = 0;
    PS_RETURN_IF_ERROR(
        CheckInputFile(path, "IDX file", std::numeric_limits<int64_t>::max(), &size));
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat("IDX file ", path, " is unreadable: ", std::strerror(errno)));
    }
    gzbuffer(file, 256 * 1024);
    // gzdirect looks at the first bytes: 1f 8b means gzip, anything else is read raw.
    const bool raw = gzdirect(file) == 1;
    return std::unique_ptr<IdxInput>(new IdxInput(path, file, raw ? size : -1));
  }

  ~IdxInput() { gzclose(file_); }
  IdxInput(const IdxInput&) = delete;
  IdxInput& operator=(const IdxInput&) = delete;

  // Size on disk for a raw file, -1 for gzip (unknown until read).
  int64_t raw_size() const { return raw_size_; }
  const std::string& path() const { return path_; }

  // Reads up to n bytes; returns how many (fewer only at the end of the data).
  absl::StatusOr<size_t> Read(void* buffer, size_t n) {
    size_t done = 0;
    while (done < n) {
      const unsigned want = static_cast<unsigned>(std::min<size_t>(n - done, kChunkBytes));
      const int got = gzread(file_, static_cast<char*>(buffer) + done, want);
      if (got < 0) return ZlibError();
      if (got == 0) {
        // A gzip stream cut short reads as a clean end plus an error code.
        int code = Z_OK;
        gzerror(file_, &code);
        if (code != Z_OK && code != Z_STREAM_END) return ZlibError();
        break;
      }
      done += static_cast<size_t>(got);
    }
    return done;
  }

 private:
  IdxInput(std::string path, gzFile file, int64_t raw_size)
      : path_(std::move(path)), file_(file), raw_size_(raw_size) {}

  absl::Status ZlibError() {
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    return Problem(path_, absl::StrCat("corrupt gzip data (", message ? message : "?", ")"));
  }

  std::string path_;
  gzFile file_;
  int64_t raw_size_;
};

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Reads the header, checks it against what the caller expects, and reads all values,
// converted by `scale`. Returns the dimensions in `dims`.
absl::StatusOr<std::vector<float>> ReadIdx(const std::string& path, int want_ndims,
                                           absl::string_view kind, float scale,
                                           std::vector<int64_t>* dims) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<IdxInput> input, IdxInput::Open(path));
  const uint32_t want_magic = (uint32_t{kUnsignedByte} << 8) | static_cast<uint32_t>(want_ndims);
  const size_t header_bytes = 4 + 4 * static_cast<size_t>(want_ndims);

  uint8_t header[16];
  PS_ASSIGN_OR_RETURN(size_t got, input->Read(header, 4));
  if (got < 4) {
    return Problem(path, absl::StrCat("truncated: ", got, " bytes, too short for an IDX header"));
  }
  const uint32_t magic = BigEndian32(header);
  if (magic != want_magic) {
    if (header[0] == 0 && header[1] == 0 && header[2] != kUnsignedByte) {
      return Problem(path,
                     absl::StrFormat("unsupported IDX data type 0x%02X (only unsigned bytes, 0x08)",
                                     header[2]));
    }
    return Problem(path, absl::StrFormat("wrong magic 0x%08X (want 0x%08X for IDX %s)", magic,
                                         want_magic, kind));
  }
  PS_ASSIGN_OR_RETURN(got, input->Read(header + 4, header_bytes - 4));
  if (got < header_bytes - 4) {
    return Problem(
        path, absl::StrCat("truncated: header needs ", header_bytes, " bytes, file has ", 4 + got));
  }
  dims->clear();
  int64_t total = 1;
  for (int d = 0; d < want_ndims; ++d) {
    const int64_t dim = BigEndian32(header + 4 + 4 * d);
    dims->push_back(dim);
    if (dim > kMaxIdxValues || (dim > 0 && total > kMaxIdxValues / dim)) {
      return Problem(path, absl::StrCat("dimensions [", absl::StrJoin(*dims, ","),
                                        "...] are too large (limit ", kMaxIdxValues, " values)"));
    }
    total *= dim;
  }
  PS_RETURN_IF_ERROR(CheckMemoryBudget(
      total * static_cast<int64_t>(sizeof(float)),
      absl::StrCat("IDX file ", path, " (", absl::StrJoin(*dims, "x"), " values as floats)")));
  if (input->raw_size() >= 0 && input->raw_size() != static_cast<int64_t>(header_bytes) + total) {
    return Problem(
        path, absl::StrCat(input->raw_size() < static_cast<int64_t>(header_bytes) + total
                               ? "truncated: "
                               : "has trailing data: ",
                           "header [", absl::StrJoin(*dims, ","), "] needs ", header_bytes + total,
                           " bytes, file has ", input->raw_size()));
  }

  // For gzip the header is unverified until the data is there: grow with the data read.
  std::vector<float> values;
  values.reserve(
      static_cast<size_t>(input->raw_size() >= 0 ? total : std::min<int64_t>(total, kChunkBytes)));
  std::vector<uint8_t> chunk(std::min<int64_t>(std::max<int64_t>(total, 1), kChunkBytes));
  int64_t remaining = total;
  while (remaining > 0) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(remaining, chunk.size()));
    PS_ASSIGN_OR_RETURN(got, input->Read(chunk.data(), want));
    for (size_t i = 0; i < got; ++i) values.push_back(static_cast<float>(chunk[i]) * scale);
    remaining -= static_cast<int64_t>(got);
    if (got < want) {
      return Problem(
          path, absl::StrCat("truncated: header [", absl::StrJoin(*dims, ","), "] needs ", total,
                             " values, data ends after ", total - remaining));
    }
  }
  uint8_t extra;
  PS_ASSIGN_OR_RETURN(got, input->Read(&extra, 1));
  if (got != 0) {
    return Problem(path, absl::StrCat("has trailing data after the ", total, " values its header [",
                                      absl::StrJoin(*dims, ","), "] declares"));
  }
  return values;
}

}  // namespace

absl::StatusOr<Tensor> ReadIdxImages(const std::string& path, float scale) {
  std::vector<int64_t> dims;
  PS_ASSIGN_OR_RETURN(std::vector<float> values, ReadIdx(path, 3, "images", scale, &dims));
  return Tensor({dims[0], dims[1] * dims[2]}, std::move(values));
}

absl::StatusOr<Tensor> ReadIdxLabels(const std::string& path) {
  std::vector<int64_t> dims;
  PS_ASSIGN_OR_RETURN(std::vector<float> values, ReadIdx(path, 1, "labels", 1.0f, &dims));
  return Tensor({dims[0]}, std::move(values));
}

absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path, float scale) {
  PS_ASSIGN_OR_RETURN(Tensor x, ReadIdxImages(images_path, scale));
  PS_ASSIGN_OR_RETURN(Tensor y, ReadIdxLabels(labels_path));
  if (x.shape()[0] != y.shape()[0]) {
    return absl::InvalidArgumentError(absl::StrCat("IDX files disagree: ", images_path, " has ",
                                                   x.shape()[0], " images but ", labels_path,
                                                   " has ", y.shape()[0], " labels"));
  }
  float max_label = -1.0f;
  for (float v : y.values()) max_label = std::max(max_label, v);
  const int64_t num_classes = static_cast<int64_t>(max_label) + 1;
  return MakeDataset(std::move(x), std::move(y), num_classes);
}

}  // namespace pstrain
