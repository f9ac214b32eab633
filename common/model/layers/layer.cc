#include "common/model/layers/layer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

absl::Status Layer::Build(const Shape& input_shape) {
  input_shape_ = input_shape;
  variables_.clear();
  PS_ASSIGN_OR_RETURN(output_shape_, BuildShapes(input_shape));
  if (NumElements(output_shape_) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("output shape ", ShapeToString(output_shape_),
                                                   " is empty"));
  }
  return absl::OkStatus();
}

int64_t Layer::RowsOf(const Shape& shape, int64_t batch) const {
  int64_t rows = batch;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return rows;
}

json Layer::ToKeras() const {
  json config = {{"name", name_}, {"trainable", true}, {"dtype", Float32Policy()}};
  json own = KerasConfig();
  for (auto it = own.begin(); it != own.end(); ++it) config[it.key()] = it.value();
  return {{"module", "keras.layers"},
          {"class_name", class_name_},
          {"config", config},
          {"registered_name", nullptr},
          {"build_config", {{"input_shape", BatchShapeJson(input_shape_)}}}};
}

absl::StatusOr<Shape> ParseKerasShape(const json& v, bool has_batch) {
  if (!v.is_array() || (has_batch && v.empty())) {
    return absl::InvalidArgumentError(absl::StrCat("input shape must be a list, got ", v.dump()));
  }
  Shape shape;
  for (size_t i = has_batch ? 1 : 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<int64_t>() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input shape ", v.dump(),
                       " has an unknown or invalid dimension; the input size must be known"));
    }
    shape.push_back(v[i].get<int64_t>());
  }
  if (shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("input shape ", v.dump(), " is a scalar"));
  }
  if (NumElements(shape) < 0) {
    return absl::InvalidArgumentError(absl::StrCat("input shape ", v.dump(), " is too large"));
  }
  return shape;
}

json BatchShapeJson(const Shape& shape) {
  json out = json::array({nullptr});
  for (int64_t d : shape) out.push_back(d);
  return out;
}

absl::Status ReadInputShapeKeys(LayerConfig& config,
                                std::initializer_list<const char*> batched,
                                std::initializer_list<const char*> unbatched, Layer* layer) {
  for (const auto& [keys, has_batch] : {std::make_pair(batched, true),
                                        std::make_pair(unbatched, false)}) {
    for (const char* key : keys) {
      const json& v = config.Raw(key);
      if (v.is_null() || (!has_batch && !layer->declared_input_shape().empty())) continue;
      absl::StatusOr<Shape> shape = ParseKerasShape(v, has_batch);
      if (!shape.ok()) return config.Error(shape.status().message());
      layer->set_declared_input_shape(*shape);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadCommonKeys(LayerConfig& config, Layer* layer) {
  PS_ASSIGN_OR_RETURN(std::string name, config.String("name", ""));
  PS_ASSIGN_OR_RETURN(bool trainable, config.Bool("trainable", true));
  if (!trainable) return config.Error("trainable=false (frozen layers) is unsupported");
  const json& dtype = config.Raw("dtype");
  if (!dtype.is_null()) {
    const json* policy = &dtype;
    // Keras 2: {"class_name": "Policy", "config": {"name": ...}}; Keras 3: DTypePolicy.
    if (dtype.is_object() && dtype.contains("config") && dtype["config"].is_object() &&
        dtype["config"].contains("name")) {
      policy = &dtype["config"]["name"];
    }
    if (!policy->is_string() || policy->get<std::string>() != "float32") {
      return config.Error(
          absl::StrCat("dtype ", dtype.dump(), " is unsupported (only float32)"));
    }
  }
  PS_ASSIGN_OR_RETURN(bool autocast, config.Bool("autocast", true));
  (void)autocast;  // float32 throughout: nothing to cast
  PS_RETURN_IF_ERROR(config.Unsupported("activity_regularizer"));
  PS_RETURN_IF_ERROR(config.Unsupported("weights"));
  PS_ASSIGN_OR_RETURN(int64_t batch_size, config.Int("batch_size", 0));
  (void)batch_size;  // the batch comes from fit.batch_size
  // Declared input shapes (Keras 2 writes batch_input_shape on the first layer).
  PS_RETURN_IF_ERROR(ReadInputShapeKeys(config, {"batch_shape", "batch_input_shape"},
                                        {"input_shape"}, layer));
  if (config.WasRead("input_dim")) return name;  // the layer's own argument (Embedding)
  PS_ASSIGN_OR_RETURN(int64_t input_dim, config.Int("input_dim", 0));
  if (input_dim < 0) return config.Error("input_dim must be positive");
  if (input_dim > 0 && layer->declared_input_shape().empty()) {
    layer->set_declared_input_shape({input_dim});
  }
  return name;
}

}  // namespace pstrain
