#ifndef PSTRAIN_COMMON_DATA_NPY_READER_H_
#define PSTRAIN_COMMON_DATA_NPY_READER_H_

// NumPy .npy files (format versions 1-3) as float tensors. Accepted element types:
// float32 ('<f4'), float64 ('<f8'), uint8 ('|u1'), int64 ('<i8'); little-endian,
// C order only (fortran_order True and big-endian files are rejected, not converted).
// The file size must match the header exactly, checked before any allocation.
// Thread-compatible.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/tensor.h"

namespace pstrain {

// Largest element count accepted.
inline constexpr int64_t kMaxNpyValues = int64_t{1} << 28;

// The array as float32 with its shape (a 0-d array becomes shape [1]).
// Errors: NotFound when the file does not exist; PermissionDenied when it cannot be read;
// InvalidArgument naming the file for something other than a regular file, a bad magic
// or header, an unsupported dtype or order, a size mismatch, or a value that is not a
// finite float32 (NaN, an infinity, a float64 beyond FLT_MAX: naming the element and its
// row, in file order).
absl::StatusOr<Tensor> ReadNpy(const std::string& path);

// x from x_path flattened to [N, F]; y from y_path as [N] (class ids) or [N, K];
// x multiplied by `scale`. num_classes 0: for [N] labels that are all non-negative
// integers, max + 1; for [N, K], K; else 0.
// Errors: as ReadNpy, and InvalidArgument when the row counts differ.
absl::StatusOr<Dataset> ReadNpyDataset(const std::string& x_path, const std::string& y_path,
                                       float scale = 1.0f, int64_t num_classes = 0);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_NPY_READER_H_
