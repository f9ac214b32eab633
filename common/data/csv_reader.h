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

// x: [N, columns - 1], y: [N].
// Errors: NotFound when the file cannot be opened; InvalidArgument (naming the file and
// line) for a non-numeric field, a ragged line, a label column out of range, no data rows,
// a file over kMaxCsvBytes, or labels that do not fit num_classes.
absl::StatusOr<Dataset> ReadCsvDataset(const std::string& path, const CsvOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_CSV_READER_H_
