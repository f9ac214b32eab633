#ifndef PSTRAIN_TESTS_FUZZ_FUZZ_INPUT_H_
#define PSTRAIN_TESTS_FUZZ_FUZZ_INPUT_H_

// Helpers for fuzz targets of readers that take a path.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace pstrain {

// A per-process scratch folder (created once, under TEST_TMPDIR or /tmp).
const std::string& FuzzScratchDir();

// Writes `bytes` to FuzzScratchDir()/`name` (replacing it) and returns the path.
std::string WriteFuzzFile(const std::string& name, absl::string_view bytes);

// Splits `data` into `parts` pieces at the separator "\n--\n" (the last piece takes the
// rest; missing pieces are empty), so that one input can carry several files.
void SplitFuzzInput(absl::string_view data, int parts, std::string* out);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_FUZZ_FUZZ_INPUT_H_
