#include "common/model/layers/input_layer.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

absl::StatusOr<std::unique_ptr<Layer>> InputLayer::FromConfig(LayerConfig& config) {
  std::unique_ptr<InputLayer> layer(new InputLayer());
  PS_ASSIGN_OR_RETURN(std::string name, config.String("name", ""));
  layer->set_name(name);
  PS_RETURN_IF_ERROR(ReadInputShapeKeys(config, {"batch_shape", "batch_input_shape"},
                                        {"shape", "input_shape"}, layer.get()));
  PS_ASSIGN_OR_RETURN(int64_t batch_size, config.Int("batch_size", 0));
  (void)batch_size;  // the batch comes from fit.batch_size
  PS_ASSIGN_OR_RETURN(std::string dtype, config.String("dtype", "float32"));
  if (dtype != "float32") {
    return config.Error(absl::StrCat("dtype \"", dtype, "\" is unsupported (only float32)"));
  }
  for (const char* key : {"sparse", "ragged"}) {
    PS_ASSIGN_OR_RETURN(bool set, config.Bool(key, false));
    if (set) return config.Error(absl::StrCat(key, " inputs are unsupported"));
  }
  PS_RETURN_IF_ERROR(config.Unsupported("optional", false));
  PS_RETURN_IF_ERROR(config.Unsupported("input_tensor"));
  PS_RETURN_IF_ERROR(config.Unsupported("type_spec"));
  return std::unique_ptr<Layer>(std::move(layer));
}

json InputLayer::KerasEntry(const std::string& name, const Shape& shape) {
  return {{"module", "keras.layers"},
          {"class_name", "InputLayer"},
          {"config",
           {{"batch_shape", BatchShapeJson(shape)},
            {"dtype", "float32"},
            {"sparse", false},
            {"ragged", false},
            {"name", name}}},
          {"registered_name", nullptr}};
}

json InputLayer::KerasConfig() const { return json::object(); }

}  // namespace pstrain
