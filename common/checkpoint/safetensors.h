#ifndef PSTRAIN_COMMON_CHECKPOINT_SAFETENSORS_H_
#define PSTRAIN_COMMON_CHECKPOINT_SAFETENSORS_H_

// Export of checkpoint tensors in the safetensors format (huggingface/safetensors), which
// PyTorch (safetensors.torch.load_file) and NumPy (safetensors.numpy) load directly:
//
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   JSON: {"__metadata__": {string: string}, "<name>": {"dtype": "F32",
//             "shape": [...], "data_offsets": [begin, end]}, ...}, padded with spaces so
//             that the data starts 8-byte aligned
//   the data  each tensor's little-endian float32 bytes, row-major; offsets are relative
//             to the start of the data and the tensors are contiguous in header order.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint/checkpoint.h"

namespace pstrain {

// The model's variables in `checkpoint` (not the optimizer slots), in the order written:
// the names its metadata lists under "variables", or, for a checkpoint without that, every
// tensor whose name has no "/optimizer/" part.
std::vector<std::string> ModelVariableNames(const CheckpointReader& checkpoint);

// Writes the tensors `names` of `checkpoint` to `out_path` (atomically: temp file,
// fsync, rename), with `metadata` as "__metadata__": the header from the tensors' shapes,
// then each tensor's bytes in blocks of rows of at most 16 MiB (CheckpointReader::
// ReadRows), so a checkpoint opened without its tensors is exported in bounded memory.
// Errors: NOT_FOUND a name not in the checkpoint; INVALID_ARGUMENT a duplicate name or
//         the reserved "__metadata__"; INTERNAL a file-system call failed; DATA_LOSS a
//         shard file that fails its checks (nothing is left at `out_path`).
absl::Status WriteSafetensors(const CheckpointReader& checkpoint,
                              const std::vector<std::string>& names,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& out_path);

// A safetensors file as read back: its "__metadata__" and its tensors in data order.
struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors;
};

// Reads what WriteSafetensors writes (and any safetensors file of F32 tensors). Nothing in
// the file is trusted: the header length must fit the file, every tensor's offsets must
// lie in the data and match its shape's byte count, and the tensors must tile the data
// exactly (no overlap, no hole), as the format requires.
// Errors: DATA_LOSS naming the problem (a header that does not fit or does not parse, a
// dtype other than F32, a shape or offsets that do not match, trailing or missing bytes).
absl::StatusOr<SafetensorsFile> ParseSafetensors(absl::string_view bytes);

// ParseSafetensors of the file at `path`. Errors: also NOT_FOUND / PERMISSION_DENIED /
// INTERNAL when it cannot be read.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_SAFETENSORS_H_
