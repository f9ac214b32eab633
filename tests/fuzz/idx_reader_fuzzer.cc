// IDX files (MNIST's format), raw or gzip, as images and as labels.

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/data/idx_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pstrain::WriteFuzzFile(
      "input.idx", std::string(reinterpret_cast<const char*>(data), size));
  (void)pstrain::ReadIdxImages(path, 1.0f / 255.0f);
  (void)pstrain::ReadIdxLabels(path);
  return 0;
}
