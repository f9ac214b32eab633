#include "common/data/npy_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/data/input_file.h"
#include "common/finite.h"
#include "common/memory_budget.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

absl::Status Problem(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("NPY file ", path, ": ", message));
}

bool ReadExact(std::FILE* file, void* buffer, size_t n) {
  return std::fread(buffer, 1, n, file) == n;
}

// Value of `key` in the header dict, up to the next top-level ',' or '}' (a tuple's
// commas are inside parentheses).
absl::StatusOr<std::string> DictValue(absl::string_view header, absl::string_view key,
                                      const std::string& path) {
  for (const char quote : {'\'', '"'}) {
    const std::string quoted = absl::StrCat(std::string(1, quote), key, std::string(1, quote));
    size_t at = header.find(quoted);
    if (at == absl::string_view::npos) continue;
    at = header.find(':', at + quoted.size());
    if (at == absl::string_view::npos) break;
    size_t end = at + 1;
    int depth = 0;
    while (end < header.size()) {
      const char c = header[end];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (depth == 0 && (c == ',' || c == '}')) break;
      ++end;
    }
    return std::string(absl::StripAsciiWhitespace(header.substr(at + 1, end - at - 1)));
  }
  return Problem(path, absl::StrCat("header has no '", key, "'"));
}

template <typename T>
void Convert(const char* bytes, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

// Index of the first float64 that is not a finite float (NaN, an infinity, or beyond
// FLT_MAX, whose conversion would be undefined), or -1.
int64_t FirstNonFiniteDouble(const char* bytes, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v;
    std::memcpy(&v, bytes + i * sizeof(double), sizeof(double));
    if (!(std::fabs(v) <= static_cast<double>(FLT_MAX))) return i;
  }
  return -1;
}

// "element 17 (row 2, in file order)" for flat index `i` of an array of `shape`.
std::string ElementName(int64_t i, const std::vector<int64_t>& shape) {
  const int64_t rows = shape.empty() ? 1 : shape[0];
  const int64_t per_row = rows > 0 ? NumElements(shape) / rows : 1;
  return absl::StrCat("element ", i, " (row ", i / std::max<int64_t>(per_row, 1),
                      ", in file order)");
}

// What a .npy header says: the dtype, the shape and where the values start.
struct NpyHeader {
  std::string descr;       // "<f4", "<f8", "<i8", "|u1"
  size_t item_size = 0;    // bytes per value in the file
  std::string shape_text;  // as written, for messages
  std::vector<int64_t> shape;
  int64_t total = 0;  // values
  int64_t data_offset = 0;
};

// The dtype a header's descr names; *item_size its bytes per value.
absl::StatusOr<std::string> ParseNpyDescr(std::string descr, const std::string& path,
                                          size_t* item_size) {
  descr = std::string(absl::StripSuffix(absl::StripPrefix(descr, "'"), "'"));
  descr = std::string(absl::StripSuffix(absl::StripPrefix(descr, "\""), "\""));
  if (descr == "<f4") {
    *item_size = 4;
  } else if (descr == "<f8" || descr == "<i8") {
    *item_size = 8;
  } else if (descr == "|u1" || descr == "<u1" || descr == "u1") {
    descr = "|u1";
    *item_size = 1;
  } else {
    return Problem(path, absl::StrCat("unsupported dtype '", descr,
                                      "' (want little-endian float32, float64, uint8 or int64)"));
  }
  return descr;
}

// A header's shape tuple "(60000, 784)"; *total the values it holds (at most
// kMaxNpyValues, checked without overflow).
absl::StatusOr<std::vector<int64_t>> ParseNpyShape(const std::string& shape_text,
                                                   const std::string& path, int64_t* total) {
  absl::string_view inner = absl::StripAsciiWhitespace(shape_text);
  if (!absl::ConsumePrefix(&inner, "(") || !absl::ConsumeSuffix(&inner, ")")) {
    return Problem(path, absl::StrCat("bad shape ", shape_text));
  }
  std::vector<int64_t> shape;
  *total = 1;
  for (absl::string_view part : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
    int64_t dim;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &dim) || dim < 0 ||
        dim > kMaxNpyValues || (dim > 0 && *total > kMaxNpyValues / dim)) {
      return Problem(path, absl::StrCat("bad or too large shape ", shape_text));
    }
    shape.push_back(dim);
    *total *= dim;
  }
  if (shape.empty()) shape.push_back(1);  // a 0-d array holds one value
  return shape;
}

// Reads the preamble and header dictionary, leaving `file` at the first value, and checks
// that the file's size is exactly what the header describes.
absl::StatusOr<NpyHeader> ReadNpyHeader(FILE* file, int64_t file_size, const std::string& path) {
  unsigned char preamble[8];
  if (!ReadExact(file, preamble, 8) || std::memcmp(preamble, "\x93NUMPY", 6) != 0) {
    return Problem(path, "not a .npy file (bad magic)");
  }
  const int major = preamble[6];
  int64_t header_len = 0;
  int64_t prefix = 0;
  if (major == 1) {
    unsigned char len[2];
    if (!ReadExact(file, len, 2)) return Problem(path, "truncated header");
    header_len = len[0] | (len[1] << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (!ReadExact(file, len, 4)) return Problem(path, "truncated header");
    header_len = int64_t{len[0]} | (int64_t{len[1]} << 8) | (int64_t{len[2]} << 16) |
                 (int64_t{len[3]} << 24);
    prefix = 12;
  } else {
    return Problem(path, absl::StrCat("unsupported .npy format version ", major));
  }
  if (header_len > (1 << 20) || prefix + header_len > file_size) {
    return Problem(path, absl::StrCat("header length ", header_len, " does not fit the file"));
  }
  std::string text(header_len, '\0');
  if (!ReadExact(file, text.data(), text.size())) return Problem(path, "truncated header");

  NpyHeader header;
  PS_ASSIGN_OR_RETURN(std::string descr, DictValue(text, "descr", path));
  PS_ASSIGN_OR_RETURN(std::string order, DictValue(text, "fortran_order", path));
  PS_ASSIGN_OR_RETURN(header.shape_text, DictValue(text, "shape", path));
  if (order != "False") {
    return Problem(path, "is in Fortran order; save it with C order (np.ascontiguousarray)");
  }
  PS_ASSIGN_OR_RETURN(header.descr, ParseNpyDescr(std::move(descr), path, &header.item_size));
  PS_ASSIGN_OR_RETURN(header.shape, ParseNpyShape(header.shape_text, path, &header.total));
  header.data_offset = prefix + header_len;
  const int64_t want = header.data_offset + header.total * static_cast<int64_t>(header.item_size);
  if (file_size != want) {
    return Problem(
        path, absl::StrCat("size ", file_size, " does not match shape ", header.shape_text, " of ",
                           header.descr, " (want ", want, " bytes)"));
  }
  return header;
}

// The values as float32 and the shape; ReadNpyDataset reshapes without a second copy.
absl::StatusOr<std::vector<float>> ReadNpyValues(const std::string& path,
                                                 std::vector<int64_t>* shape_out) {
  // The largest file a header within the limits describes (float64 values).
  constexpr int64_t kMaxFileBytes = 12 + (int64_t{1} << 20) + kMaxNpyValues * 8;
  PS_ASSIGN_OR_RETURN(InputFile input, OpenInputFile(path, "NPY file", kMaxFileBytes));
  PS_ASSIGN_OR_RETURN(NpyHeader header, ReadNpyHeader(input.file.get(), input.size, path));
  FILE* file = input.file.get();
  const int64_t total = header.total;
  const size_t item_size = header.item_size;
  const std::vector<int64_t>& shape = header.shape;
  PS_RETURN_IF_ERROR(CheckMemoryBudget(
      total * static_cast<int64_t>(sizeof(float) + (item_size == 4 ? 0 : item_size)),
      absl::StrCat("NPY file ", path, " (", header.shape_text, " values as floats)")));
  *shape_out = shape;
  std::vector<float> out(total);
  if (item_size == 4) {
    // float32 on a little-endian host: read straight into place.
    if (!ReadExact(file, out.data(), total * 4)) return Problem(path, "truncated data");
    if (const int64_t bad = FirstNonFinite(out); bad >= 0) {
      return Problem(path, absl::StrCat(ElementName(bad, shape), " is ", DescribeFloat(out[bad]),
                                        ": every value must be finite"));
    }
    return out;
  }
  std::vector<char> bytes(total * item_size);
  if (!ReadExact(file, bytes.data(), bytes.size())) return Problem(path, "truncated data");
  if (header.descr == "<f8") {
    if (const int64_t bad = FirstNonFiniteDouble(bytes.data(), total); bad >= 0) {
      double v;
      std::memcpy(&v, bytes.data() + bad * 8, 8);
      return Problem(path, absl::StrCat(ElementName(bad, shape), " is ", v,
                                        ": every value must be a finite float32"));
    }
    Convert<double>(bytes.data(), total, out.data());
  } else if (header.descr == "<i8") {
    Convert<int64_t>(bytes.data(), total, out.data());
  } else {
    Convert<uint8_t>(bytes.data(), total, out.data());
  }
  return out;
}

}  // namespace

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  std::vector<int64_t> shape;
  PS_ASSIGN_OR_RETURN(std::vector<float> values, ReadNpyValues(path, &shape));
  return Tensor(std::move(shape), std::move(values));
}

absl::StatusOr<Dataset> ReadNpyDataset(const std::string& x_path, const std::string& y_path,
                                       float scale, int64_t num_classes) {
  std::vector<int64_t> x_shape;
  PS_ASSIGN_OR_RETURN(std::vector<float> values, ReadNpyValues(x_path, &x_shape));
  PS_ASSIGN_OR_RETURN(Tensor y, ReadNpy(y_path));
  const int64_t n = x_shape[0];
  if (y.shape()[0] != n) {
    return absl::InvalidArgumentError(absl::StrCat("NPY files disagree: ", x_path, " has ", n,
                                                   " rows but ", y_path, " has ", y.shape()[0]));
  }
  if (y.shape().size() > 2) {
    return Problem(y_path, absl::StrCat("labels must be [N] or [N, K], got ", y.ShapeString()));
  }
  int64_t features = 1;
  for (size_t d = 1; d < x_shape.size(); ++d) features *= x_shape[d];
  if (scale != 1.0f) {
    for (float& v : values) v *= scale;
    if (const int64_t bad = FirstNonFinite(values); bad >= 0) {
      return Problem(x_path, absl::StrCat(ElementName(bad, x_shape), " times scale ", scale,
                                          " is not a finite float"));
    }
  }
  if (num_classes == 0) {
    if (y.shape().size() == 2) {
      num_classes = y.shape()[1];
    } else {
      float max_label = 0.0f;
      bool integral = true;
      for (float v : y.values()) {
        integral = integral && v >= 0.0f && std::floor(v) == v && v < 16777216.0f;
        if (integral) max_label = std::max(max_label, v);
      }
      num_classes = integral && n > 0 ? static_cast<int64_t>(max_label) + 1 : 0;
    }
  }
  return MakeDataset(Tensor({n, features}, std::move(values)), std::move(y), num_classes);
}

}  // namespace pstrain
