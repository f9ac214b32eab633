// NumPy .npy files, alone and as an x/y pair (one input holds both, split at "\n--\n").

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/data/npy_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)pstrain::ReadNpy(pstrain::WriteFuzzFile("whole.npy", text));
  std::string parts[2];
  pstrain::SplitFuzzInput(text, 2, parts);
  (void)pstrain::ReadNpyDataset(pstrain::WriteFuzzFile("x.npy", parts[0]),
                                pstrain::WriteFuzzFile("y.npy", parts[1]), 0.5f);
  return 0;
}
