// Keras model JSON (model.to_json()), built without a backend as a job spec's model is
// checked: a model that builds writes back (ToKerasJson) to JSON that builds to a model
// with the same variables and shapes.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/model/model.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::unique_ptr<pstrain::Model>> model =
      pstrain::Model::FromKerasJsonText(text, /*backend=*/nullptr);
  if (!model.ok()) return 0;
  absl::StatusOr<std::unique_ptr<pstrain::Model>> back =
      pstrain::Model::FromKerasJson((*model)->ToKerasJson(), /*backend=*/nullptr);
  if (!back.ok()) std::abort();
  const auto& a = (*model)->variables();
  const auto& b = (*back)->variables();
  if (a.size() != b.size()) std::abort();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].shape != b[i].shape) std::abort();
  }
  return 0;
}
