#include "common/data/csv_reader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/data/input_file.h"
#include "common/memory_budget.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

absl::Status Problem(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("CSV file ", path, ": ", message));
}

// The whole file, refused before reading when it is not a regular file (/dev/zero used
// to be read for 2 GiB) or is larger than kMaxCsvBytes.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  PS_ASSIGN_OR_RETURN(InputFile input, OpenInputFile(path, "CSV file", kMaxCsvBytes));
  // The text, and at most one float per two bytes of it.
  PS_RETURN_IF_ERROR(CheckMemoryBudget(
      SaturatingMul(input.size, 3), absl::StrCat("CSV file ", path, " (", input.size,
                                                 " bytes of text, parsed to floats)")));
  std::string text(static_cast<size_t>(input.size), '\0');
  const size_t got = std::fread(text.data(), 1, text.size(), input.file.get());
  if (std::ferror(input.file.get()) != 0) {
    return Problem(path, absl::StrCat("read error: ", std::strerror(errno)));
  }
  text.resize(got);  // shorter if the file shrank meanwhile
  return text;
}

}  // namespace

absl::StatusOr<Dataset> ReadCsvDataset(const std::string& path, const CsvOptions& options) {
  PS_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  std::vector<float> features;
  std::vector<float> labels;
  int64_t columns = -1;
  int64_t label_column = -1;
  bool skipped_header = !options.header;
  int64_t line_number = 0;
  std::vector<absl::string_view> fields;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (!skipped_header) {
      skipped_header = true;
      continue;
    }
    fields = absl::StrSplit(line, options.delimiter);
    if (columns < 0) {
      columns = static_cast<int64_t>(fields.size());
      if (columns < 2) {
        return Problem(path, absl::StrCat("line ", line_number,
                                          " has fewer than 2 columns (features and a label)"));
      }
      label_column =
          options.label_column < 0 ? columns + options.label_column : options.label_column;
      if (label_column < 0 || label_column >= columns) {
        return Problem(path, absl::StrCat("label column ", options.label_column,
                                          " is out of range for ", columns, " columns"));
      }
    } else if (static_cast<int64_t>(fields.size()) != columns) {
      return Problem(path, absl::StrCat("line ", line_number, " has ", fields.size(),
                                        " fields, expected ", columns));
    }
    for (int64_t c = 0; c < columns; ++c) {
      float value;
      const bool number = absl::SimpleAtof(fields[c], &value);
      if (number && c != label_column) value *= options.scale;
      // "nan", "inf" and numbers beyond a float parse, and a scale can overflow: a
      // non-finite value poisons every weight it reaches, so it is refused here.
      if (!number || !std::isfinite(value)) {
        std::string shown(absl::StripAsciiWhitespace(fields[c].substr(0, 40)));
        return Problem(path, absl::StrCat("line ", line_number, " column ", c + 1, ": \"", shown,
                                          number ? "\" is not a finite number"
                                                 : "\" is not a number"));
      }
      if (c == label_column) {
        labels.push_back(value);
      } else {
        features.push_back(value);
      }
    }
  }
  if (labels.empty()) return Problem(path, "has no data rows");
  int64_t num_classes = options.num_classes;
  if (num_classes == 0) {
    // Class ids when every label is a small non-negative integer; else a regression target.
    float max_label = 0.0f;
    bool integral = true;
    for (float v : labels) {
      integral = integral && v >= 0.0f && std::floor(v) == v && v < 16777216.0f;
      if (integral) max_label = std::max(max_label, v);
    }
    num_classes = integral ? static_cast<int64_t>(max_label) + 1 : 0;
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  absl::StatusOr<Dataset> data = MakeDataset(Tensor({n, columns - 1}, std::move(features)),
                                             Tensor({n}, std::move(labels)), num_classes);
  if (!data.ok()) return Problem(path, data.status().message());
  return data;
}

}  // namespace pstrain
