#ifndef PSTRAIN_COMMON_DATA_CSV_READER_H_
#define PSTRAIN_COMMON_DATA_CSV_READER_H_

// A numeric CSV file as a Dataset: one example per line, one column the label, the rest
// features. No quoting (numeric data only); blank lines are skipped; "\r\n" is accepted.
// Thread-compatible.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"

namespace pstrain {

struct CsvOptions {
  // Column holding the label; negative counts from the end (-1 = last).
  int64_t label_column = -1;
  // The first non-blank line is a header and is skipped.
  bool header = true;
  char delimiter = ',';
  // Features are multiplied by this.
  float scale = 1.0f;
  // 0: max label + 1 when every label is a non-negative integer, else 0 (regression).
  int64_t num_classes = 0;
};

// Largest file read (the whole file is held in memory while parsing).
inline constexpr int64_t kMaxCsvBytes = int64_t{1} << 31;

// x: [N, columns - 1], y: [N]; examples in file order.
// Errors: NotFound when the file does not exist; PermissionDenied when it cannot be read;
// InvalidArgument (naming the file, and the line and column) for something other than a
// regular file (a directory, a device such as /dev/zero: refused before reading), a file
// over kMaxCsvBytes, a non-numeric or non-finite field ("nan", "inf", 1e39, or a value
// that `scale` takes past a float), a ragged line, a label column out of range, no data
// rows, or labels that do not fit num_classes (naming the example, in file order).
absl::StatusOr<Dataset> ReadCsvDataset(const std::string& path, const CsvOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_CSV_READER_H_
