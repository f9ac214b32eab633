// export_keras: writes a checkpoint's model as a Keras 3 `.keras` file (config.json,
// metadata.json, model.weights.h5), which keras.saving.load_model reads.
//
//   export_keras --checkpoint=DIR|PATH --out=model.keras
//
// DIR is a --checkpoint_dir (its newest good checkpoint is used), PATH one checkpoint.
// The weights are read and written a block of about 16 MiB of rows at a time, through a
// temporary weights file beside the output: memory does not grow with the model.
// The optimizer's state is not exported (see common/checkpoint/keras_export.h).
// Exit codes: 0 done, 1 the checkpoint could not be read or the file written, 2 bad usage.

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/keras_export.h"
#include "common/daemon/command_line.h"
#include "common/process_memory.h"

ABSL_FLAG(std::string, checkpoint, "", "A checkpoint directory, or a --checkpoint_dir");
ABSL_FLAG(std::string, out, "", "The .keras file to write");
ABSL_FLAG(bool, print_peak_memory, false,
          "At the end, print this process's peak resident memory (VmHWM) on stderr");

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(argc, argv,
                                     "export_keras --checkpoint=DIR|PATH --out=model.keras");
  const std::string path = absl::GetFlag(FLAGS_checkpoint);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (path.empty() || out.empty()) {
    std::fprintf(stderr, "export_keras: --checkpoint and --out are required\n");
    return 2;
  }
  if (const absl::Status named = pstrain::CheckKerasPath(out, "--out="); !named.ok()) {
    std::fprintf(stderr, "export_keras: %s\n", std::string(named.message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<pstrain::CheckpointReader>> checkpoint =
      pstrain::CheckpointReader::Open(path, {/*load_sharded_tensors=*/false});
  if (!checkpoint.ok()) {
    std::fprintf(stderr, "export_keras: %s\n", std::string(checkpoint.status().message()).c_str());
    return 1;
  }
  absl::Status written = pstrain::ExportKeras(**checkpoint, out);
  if (!written.ok()) {
    std::fprintf(stderr, "export_keras: %s\n", std::string(written.message()).c_str());
    return 1;
  }
  std::printf("wrote %s (step %lld) to %s\n", (*checkpoint)->path().c_str(),
              static_cast<long long>((*checkpoint)->step()), out.c_str());
  if (absl::GetFlag(FLAGS_print_peak_memory)) {
    std::fprintf(stderr, "%s\n", pstrain::PeakMemoryLine().c_str());
  }
  return 0;
}
