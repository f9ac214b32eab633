#ifndef PSTRAIN_COMMON_DATA_IDX_READER_H_
#define PSTRAIN_COMMON_DATA_IDX_READER_H_

// Reader for the IDX files of MNIST and Fashion-MNIST: a big-endian header
// (0x00 0x00 type ndims, then ndims uint32 dimensions) followed by the values. Only
// unsigned-byte data (type 0x08) is read: images are magic 0x00000803 (N, rows, cols),
// labels 0x00000801 (N). Files may be gzip-compressed (detected by the 1f 8b magic, not
// by the file name) or raw.
//
// The header is never trusted for allocation: dimensions are capped, a raw file's size
// must match the header exactly, and gzip data is read incrementally so a lying header
// ends in an error at the real end of the data, not in a huge allocation.
//
// Every error is InvalidArgument (NotFound when the file cannot be opened), one line
// naming the file and the problem. Thread-compatible: no shared state.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/tensor.h"

namespace pstrain {

// Caps on header values (checked before any allocation). 2^28 bytes of pixels is four
// times the Fashion-MNIST training set.
inline constexpr int64_t kMaxIdxValues = int64_t{1} << 28;

// Images: float [N, rows * cols], each byte multiplied by `scale` (1/255 maps to [0, 1]).
absl::StatusOr<Tensor> ReadIdxImages(const std::string& path, float scale = 1.0f);

// Labels: float [N] holding the byte values.
absl::StatusOr<Tensor> ReadIdxLabels(const std::string& path);

// Images and labels together. num_classes is max(label) + 1 (10 for (Fashion-)MNIST).
// Errors: as above, and InvalidArgument when the two files hold different counts.
absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path, float scale = 1.0f);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_IDX_READER_H_
