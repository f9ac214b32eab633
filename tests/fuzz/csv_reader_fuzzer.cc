// CSV files with the reader's options taken from the input's first byte.

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/data/csv_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  pstrain::CsvOptions options;
  const uint8_t flags = data[0];
  options.header = (flags & 1) != 0;
  options.delimiter = (flags & 2) != 0 ? ';' : ',';
  options.label_column = (flags & 4) != 0 ? 0 : -1;
  options.num_classes = (flags >> 3) & 7;
  options.scale = (flags & 0x40) != 0 ? 1e30f : 1.0f;
  const std::string path = pstrain::WriteFuzzFile(
      "input.csv", std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  (void)pstrain::ReadCsvDataset(path, options);
  return 0;
}
