// safetensors: any bytes through the reader; and tensors made from the input written
// (checkpoint, then WriteSafetensors) and read back bit for bit.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// Up to 4 tensors: per tensor a byte of rank (0-2) and dims (0-7), then its floats from
// the input's bytes as they come (any bit pattern, NaN included).
std::vector<pstrain::NamedTensor> TensorsOf(const uint8_t* data, size_t size) {
  std::vector<pstrain::NamedTensor> tensors;
  size_t at = 0;
  while (at < size && tensors.size() < 4) {
    const uint8_t spec = data[at++];
    std::vector<int64_t> shape;
    for (int d = 0; d < (spec & 3) % 3; ++d) shape.push_back((spec >> (2 + 3 * d)) & 7);
    const int64_t n = pstrain::NumElements(shape);
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) {
      uint32_t bits = 0;
      for (int b = 0; b < 4 && at < size; ++b) bits |= static_cast<uint32_t>(data[at++]) << (8 * b);
      std::memcpy(&v, &bits, 4);
    }
    tensors.push_back({absl::StrCat("t", tensors.size()), pstrain::Tensor(shape, values)});
  }
  return tensors;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pstrain::ParseSafetensors(
      absl::string_view(reinterpret_cast<const char*>(data), size));

  pstrain::CheckpointContents contents;
  contents.tensors = TensorsOf(data, size);
  const std::string dir = pstrain::FuzzScratchDir() + "/st";
  std::filesystem::remove_all(dir);
  absl::StatusOr<std::string> written =
      pstrain::CheckpointWriter(dir, {}).Write(contents);
  if (!written.ok()) std::abort();
  absl::StatusOr<std::unique_ptr<pstrain::CheckpointReader>> checkpoint =
      pstrain::CheckpointReader::Open(*written);
  if (!checkpoint.ok()) std::abort();
  std::vector<std::string> names;
  for (const pstrain::NamedTensor& t : contents.tensors) names.push_back(t.name);
  const std::string path = dir + "/out.safetensors";
  if (!pstrain::WriteSafetensors(**checkpoint, names, {{"k", "v"}}, path).ok()) std::abort();
  absl::StatusOr<pstrain::SafetensorsFile> back = pstrain::ReadSafetensors(path);
  if (!back.ok() || back->tensors.size() != contents.tensors.size()) std::abort();
  if (back->metadata.at("k") != "v") std::abort();
  for (const pstrain::NamedTensor& t : back->tensors) {
    const pstrain::Tensor& original = contents.tensors[std::stoi(t.name.substr(1))].tensor;
    if (t.tensor.shape() != original.shape()) std::abort();
    if (t.tensor.num_elements() > 0 &&
        std::memcmp(t.tensor.data(), original.data(), 4 * t.tensor.num_elements()) != 0) {
      std::abort();
    }
  }
  return 0;
}
