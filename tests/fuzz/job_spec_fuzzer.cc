// A job spec as the chief and train read it (with the Keras model inside): a spec that
// parses serialises (SerializeJobSpec, as the chief sends it to workers) to text that
// parses again to the same text.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/model/job_spec.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A model given as a path is read from the scratch folder, so a file path costs nothing.
  absl::StatusOr<pstrain::JobSpec> spec = pstrain::ParseJobSpec(text, pstrain::FuzzScratchDir());
  if (!spec.ok()) return 0;
  const std::string serialized = pstrain::SerializeJobSpec(*spec);
  absl::StatusOr<pstrain::JobSpec> back = pstrain::ParseJobSpec(serialized, "");
  if (!back.ok() || pstrain::SerializeJobSpec(*back) != serialized) std::abort();
  return 0;
}
