// A checkpoint as train and the chief open it: a manifest and its data file (one input
// holds both, split at "\n--\n"), then the root-folder path through `latest`.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/checkpoint/checkpoint.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string parts[2];
  pstrain::SplitFuzzInput(std::string(reinterpret_cast<const char*>(data), size), 2, parts);
  const std::string root = pstrain::FuzzScratchDir() + "/root";
  std::filesystem::create_directories(root + "/ckpt-7");
  pstrain::WriteFuzzFile("root/ckpt-7/manifest.json", parts[0]);
  pstrain::WriteFuzzFile("root/ckpt-7/data-00000", parts[1]);
  pstrain::WriteFuzzFile("root/latest", "ckpt-7\n");
  absl::StatusOr<std::unique_ptr<pstrain::CheckpointReader>> direct =
      pstrain::CheckpointReader::Open(root + "/ckpt-7");
  absl::StatusOr<std::unique_ptr<pstrain::CheckpointReader>> latest =
      pstrain::CheckpointReader::Open(root);
  // The same checkpoint either way, and what verified is whole.
  if (direct.ok() != latest.ok()) std::abort();
  if (direct.ok()) {
    for (const pstrain::NamedTensor& t : (*direct)->tensors()) {
      if (t.tensor.num_elements() != pstrain::NumElements(t.tensor.shape())) std::abort();
      if (!(*direct)->Get(t.name).ok()) std::abort();
    }
  }
  return 0;
}
