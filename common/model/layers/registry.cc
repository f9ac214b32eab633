#include "common/model/layers/registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/layers/activation_layer.h"
#include "common/model/layers/average_pooling2d.h"
#include "common/model/layers/batch_normalization.h"
#include "common/model/layers/conv2d.h"
#include "common/model/layers/dense.h"
#include "common/model/layers/dropout.h"
#include "common/model/layers/embedding.h"
#include "common/model/layers/flatten.h"
#include "common/model/layers/global_average_pooling1d.h"
#include "common/model/layers/global_average_pooling2d.h"
#include "common/model/layers/input_layer.h"
#include "common/model/layers/max_pooling2d.h"
#include "common/model/layers/reshape.h"
#include "common/model/layers/softmax_layer.h"
#include "common/status_macros.h"

namespace pstrain {

absl::Status LayerRegistry::Register(Entry entry) {
  if (entry.class_name.empty() || entry.default_name.empty() || !entry.factory) {
    return absl::InvalidArgumentError(
        "a layer registers with a class name, a default name and a factory");
  }
  absl::MutexLock lock(&mu_);
  const std::string class_name = entry.class_name;
  if (!entries_.emplace(class_name, std::move(entry)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("layer class \"", class_name, "\" is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> LayerRegistry::Create(const std::string& class_name,
                                                             LayerConfig& config) const {
  Factory factory;
  bool common_keys = true;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(class_name);
    if (it == entries_.end()) {
      std::vector<std::string> known;
      for (const auto& [name, entry] : entries_) known.push_back(name);
      return config.Error(absl::StrCat("unsupported layer \"", class_name,
                                       "\" (supported: ", absl::StrJoin(known, ", "), ")"));
    }
    factory = it->second.factory;
    common_keys = it->second.common_keys;
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, factory(config));
  if (common_keys) {
    PS_ASSIGN_OR_RETURN(std::string name, ReadCommonKeys(config, layer.get()));
    layer->set_name(std::move(name));
  }
  PS_RETURN_IF_ERROR(config.CheckAllRead());
  return layer;
}

std::string LayerRegistry::DefaultName(const std::string& class_name) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(class_name);
  return it == entries_.end() ? "" : it->second.default_name;
}

std::vector<std::string> LayerRegistry::ClassNames() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

LayerRegistry& LayerRegistry::Default() {
  static LayerRegistry* const registry = [] {
    auto* r = new LayerRegistry();
    // Keras's automatic names are the snake_case class names.
    const Entry builtin[] = {
        {"InputLayer", "input_layer", /*common_keys=*/false, &InputLayer::FromConfig},
        {"Dense", "dense", true, &DenseLayer::FromConfig},
        {"Dropout", "dropout", true, &DropoutLayer::FromConfig},
        {"Activation", "activation", true, &ActivationLayer::FromConfig},
        {"Flatten", "flatten", true, &FlattenLayer::FromConfig},
        {"Conv2D", "conv2d", true, &Conv2DLayer::FromConfig},
        {"MaxPooling2D", "max_pooling2d", true, &MaxPooling2DLayer::FromConfig},
        {"AveragePooling2D", "average_pooling2d", true, &AveragePooling2DLayer::FromConfig},
        {"GlobalAveragePooling2D", "global_average_pooling2d", true,
         &GlobalAveragePooling2DLayer::FromConfig},
        {"GlobalAveragePooling1D", "global_average_pooling1d", true,
         &GlobalAveragePooling1DLayer::FromConfig},
        {"Reshape", "reshape", true, &ReshapeLayer::FromConfig},
        {"BatchNormalization", "batch_normalization", true,
         &BatchNormalizationLayer::FromConfig},
        {"Embedding", "embedding", true, &EmbeddingLayer::FromConfig},
        {"Softmax", "softmax", true, &SoftmaxLayer::FromConfig},
    };
    for (const Entry& entry : builtin) {
      absl::Status registered = r->Register(entry);
      (void)registered;  // distinct names by construction
    }
    return r;
  }();
  return *registry;
}

}  // namespace pstrain
