// TF_CONFIG as a daemon reads it from its environment, and the same facts as flags: a
// config that parses writes back (TfConfigToJson) to text that parses to the same config.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/cluster_spec.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

void CheckRoundTrip(const pstrain::TfConfig& config) {
  for (const std::string& job : config.cluster.jobs()) {
    // A job the parser kept names a role (an unknown task type is refused).
    absl::StatusOr<pstrain::Role> role = pstrain::RoleFromTaskType(job);
    if (!role.ok()) std::abort();
    for (int i = 0; i < config.cluster.num_tasks(*role); ++i) {
      if (!config.cluster.address({*role, i}).ok()) std::abort();
    }
  }
  const std::string text = pstrain::TfConfigToJson(config);
  absl::StatusOr<pstrain::TfConfig> back = pstrain::ParseTfConfig(text);
  if (!back.ok() || pstrain::TfConfigToJson(*back) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pstrain::TfConfig> config = pstrain::ParseTfConfig(text);
  if (config.ok()) CheckRoundTrip(*config);
  std::string parts[3];
  pstrain::SplitFuzzInput(text, 3, parts);
  absl::StatusOr<pstrain::TfConfig> flags = pstrain::TfConfigFromFlags(
      parts[0], parts[1], static_cast<int>(parts[2].size()) - 1);
  if (flags.ok()) CheckRoundTrip(*flags);
  return 0;
}
