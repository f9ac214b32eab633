#include "common/model/model_memory.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/memory_budget.h"

namespace pstrain {
namespace {

constexpr int64_t kFloatBytes = 4;

// Elements of a shape, saturating (an absurd shape must not wrap to a small size).
int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n = SaturatingMul(n, d);
  return n;
}

// `first`: the first layer that runs (ModelMemoryUse::first_layer_rows_held applies to it).
int64_t LayerBytes(const Layer& layer, const ModelMemoryUse& use, bool first) {
  int64_t variables = 0;
  for (const LayerVariable& v : layer.variables()) {
    std::vector<int64_t> held = v.shape;
    if (first && use.first_layer_rows_held >= 0 && !held.empty()) {
      held[0] = std::min(held[0], use.first_layer_rows_held);
    }
    variables = SaturatingAdd(variables, Elements(held));
  }
  int64_t bytes = SaturatingMul(SaturatingMul(variables, use.copies_per_variable), kFloatBytes);
  if (!layer.IsView() && use.batch > 0) {
    // The output kept for the backward pass, the gradient of the output, and of the input.
    const int64_t per_example = SaturatingAdd(SaturatingMul(Elements(layer.output_shape()), 2),
                                              Elements(layer.input_shape()));
    const int64_t activations =
        SaturatingMul(SaturatingMul(SaturatingMul(per_example, use.batch), use.replicas),
                      kFloatBytes);
    bytes = SaturatingAdd(bytes, activations);
  }
  return bytes;
}

}  // namespace

int64_t ModelMemoryBytes(const Model& model, const ModelMemoryUse& use) {
  int64_t total = 0;
  bool first = true;
  for (const auto& layer : model.layers()) {
    if (layer->IsInput()) continue;
    total = SaturatingAdd(total, LayerBytes(*layer, use, first));
    first = false;
  }
  return total;
}

absl::Status CheckModelMemory(const Model& model, const ModelMemoryUse& use,
                              absl::string_view who) {
  const int64_t total = ModelMemoryBytes(model, use);
  std::string what = absl::StrCat(who, ": model ", model.name(), " (",
                                   use.copies_are.empty() ? "its variables" : use.copies_are);
  if (use.batch > 0) absl::StrAppend(&what, "; activations for a batch of ", use.batch);
  if (use.replicas > 1) absl::StrAppend(&what, " on each of ", use.replicas, " replicas");
  absl::StrAppend(&what, ")");
  absl::Status fits = CheckMemoryBudget(total, what);
  if (fits.ok()) return fits;
  const Layer* largest = nullptr;
  int64_t largest_bytes = -1;
  bool first = true;
  for (const auto& layer : model.layers()) {
    if (layer->IsInput()) continue;
    const int64_t bytes = LayerBytes(*layer, use, first);
    first = false;
    if (bytes > largest_bytes) {
      largest = layer.get();
      largest_bytes = bytes;
    }
  }
  if (largest == nullptr) return fits;
  std::vector<std::string> shapes;
  for (const LayerVariable& v : largest->variables()) {
    shapes.push_back(absl::StrCat(v.name, " [", absl::StrJoin(v.shape, ","), "]"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      fits.message(), "; its largest layer, ", largest->name(), " (", largest->class_name(),
      "), needs ", FormatBytes(largest_bytes), ": output [", absl::StrJoin(largest->output_shape(), ","),
      "]", shapes.empty() ? "" : ", ", absl::StrJoin(shapes, ", ")));
}

}  // namespace pstrain
