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
#include "common/checkpoint/checkpoint.h"

namespace pstrain {

// The model's variables in `checkpoint` (not the optimizer slots), in the order written:
// the names its metadata lists under "variables", or, for a checkpoint without that, every
// tensor whose name has no "/optimizer/" part.
std::vector<std::string> ModelVariableNames(const CheckpointReader& checkpoint);

// Writes the tensors `names` of `checkpoint` to `out_path` (atomically: temp file,
// fsync, rename), with `metadata` as "__metadata__".
// Errors: NOT_FOUND a name not in the checkpoint; INVALID_ARGUMENT a duplicate name or
//         the reserved "__metadata__"; INTERNAL a file-system call failed.
absl::Status WriteSafetensors(const CheckpointReader& checkpoint,
                              const std::vector<std::string>& names,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& out_path);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_SAFETENSORS_H_
