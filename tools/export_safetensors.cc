// export_safetensors: writes a checkpoint's model variables (not the optimizer slots) as
// a .safetensors file that PyTorch and NumPy load directly.
//
//   export_safetensors --checkpoint=DIR|PATH --out=model.safetensors
//
// DIR is a --checkpoint_dir (its newest good checkpoint is used), PATH one checkpoint.
// Tensor names are the model's ("dense/kernel", shape [in, out] as Keras keeps it).
// A sharded (version 2) checkpoint is read from its shard files tensor by tensor, in
// blocks of rows, each block's CRC-32C verified: memory stays bounded whatever the model.
// Exit codes: 0 done, 1 the checkpoint could not be read or the file written, 2 bad usage.

#include <cstdio>
#include <map>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/safetensors.h"
#include "common/daemon/command_line.h"
#include "common/process_memory.h"

ABSL_FLAG(std::string, checkpoint, "", "A checkpoint directory, or a --checkpoint_dir");
ABSL_FLAG(std::string, out, "", "The .safetensors file to write");

ABSL_FLAG(bool, print_peak_memory, false,
          "At the end, print this process's peak resident memory (VmHWM) on stderr");

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(
      argc, argv, "export_safetensors --checkpoint=DIR|PATH --out=model.safetensors");
  const std::string path = absl::GetFlag(FLAGS_checkpoint);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (path.empty() || out.empty()) {
    std::fprintf(stderr, "export_safetensors: --checkpoint and --out are required\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<pstrain::CheckpointReader>> checkpoint =
      pstrain::CheckpointReader::Open(path, {/*load_sharded_tensors=*/false});
  if (!checkpoint.ok()) {
    std::fprintf(stderr, "export_safetensors: %s\n",
                 std::string(checkpoint.status().message()).c_str());
    return 1;
  }
  const std::vector<std::string> names = pstrain::ModelVariableNames(**checkpoint);
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"source", (*checkpoint)->path()},
      {"step", absl::StrCat((*checkpoint)->step())},
      {"epoch", absl::StrCat((*checkpoint)->epoch())}};
  absl::Status written = pstrain::WriteSafetensors(**checkpoint, names, metadata, out);
  if (!written.ok()) {
    std::fprintf(stderr, "export_safetensors: %s\n", std::string(written.message()).c_str());
    return 1;
  }
  std::printf("wrote %zu tensors of %s to %s\n", names.size(), (*checkpoint)->path().c_str(),
              out.c_str());
  if (absl::GetFlag(FLAGS_print_peak_memory)) {
    std::fprintf(stderr, "%s\n", pstrain::PeakMemoryLine().c_str());
  }
  return 0;
}
