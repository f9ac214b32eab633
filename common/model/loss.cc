#include "common/model/loss.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

}  // namespace

std::string CanonicalKerasName(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '_') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

namespace {

absl::StatusOr<LossConfig::Kind> KindFromName(const std::string& name) {
  const std::string c = CanonicalKerasName(name);
  if (c == "sparsecategoricalcrossentropy") {
    return LossConfig::Kind::kSparseCategoricalCrossentropy;
  }
  if (c == "categoricalcrossentropy") return LossConfig::Kind::kCategoricalCrossentropy;
  if (c == "mse" || c == "meansquarederror") return LossConfig::Kind::kMeanSquaredError;
  if (c == "binarycrossentropy" || c == "bce") return LossConfig::Kind::kBinaryCrossentropy;
  return absl::InvalidArgumentError(absl::StrCat("unsupported loss \"", name,
                                                 "\" (supported: sparse_categorical_crossentropy, "
                                                 "categorical_crossentropy, mean_squared_error, "
                                                 "binary_crossentropy)"));
}

}  // namespace

std::string LossName(LossConfig::Kind kind) {
  switch (kind) {
    case LossConfig::Kind::kSparseCategoricalCrossentropy:
      return "sparse_categorical_crossentropy";
    case LossConfig::Kind::kCategoricalCrossentropy:
      return "categorical_crossentropy";
    case LossConfig::Kind::kMeanSquaredError:
      return "mean_squared_error";
    case LossConfig::Kind::kBinaryCrossentropy:
      return "binary_crossentropy";
  }
  return "unknown";
}

absl::StatusOr<LossConfig> LossConfigFromKeras(const json& value) {
  LossConfig config;
  if (value.is_string()) {
    auto kind = KindFromName(value.get<std::string>());
    if (!kind.ok()) return kind.status();
    config.kind = *kind;
    return config;
  }
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss must be a string or a Keras config object, got ", value.dump()));
  }
  auto cn = value.find("class_name");
  if (cn == value.end() || !cn->is_string()) {
    return absl::InvalidArgumentError("loss config has no string \"class_name\"");
  }
  const std::string class_name = cn->get<std::string>();
  auto kind = KindFromName(class_name);
  if (!kind.ok()) return kind.status();
  config.kind = *kind;
  auto cfg = value.find("config");
  if (cfg == value.end() || cfg->is_null()) return config;
  if (!cfg->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss ", class_name, ": \"config\" must be an object"));
  }
  for (auto it = cfg->begin(); it != cfg->end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "name" || key == "axis" || key == "dtype" || key == "fn") {
      // Harmless: a label, the class axis (only -1 is meaningful for our [B,K] outputs),
      // the compute dtype.
      if (key == "axis" && !(v.is_null() || (v.is_number_integer() && v.get<int64_t>() == -1))) {
        return absl::InvalidArgumentError(
            absl::StrCat("loss ", class_name, ": axis ", v.dump(), " is unsupported (only -1)"));
      }
      continue;
    }
    if (key == "from_logits") {
      if (!v.is_boolean()) {
        return absl::InvalidArgumentError(
            absl::StrCat("loss ", class_name, ": from_logits must be a bool, got ", v.dump()));
      }
      config.from_logits = v.get<bool>();
      continue;
    }
    if (key == "reduction") {
      if (v.is_null()) continue;
      if (!v.is_string() || (v.get<std::string>() != "auto" &&
                             v.get<std::string>() != "sum_over_batch_size")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "loss ", class_name, ": reduction ", v.dump(), " is unsupported (mean over batch only)"));
      }
      continue;
    }
    if (key == "label_smoothing") {
      if (!v.is_number() || v.get<double>() != 0.0) {
        return absl::InvalidArgumentError(
            absl::StrCat("loss ", class_name, ": label_smoothing ", v.dump(), " is unsupported"));
      }
      continue;
    }
    if (key == "ignore_class") {
      if (!v.is_null()) {
        return absl::InvalidArgumentError(
            absl::StrCat("loss ", class_name, ": ignore_class ", v.dump(), " is unsupported"));
      }
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("loss ", class_name, ": unsupported field \"", key, "\""));
  }
  // Mean squared error has no logits; a stray from_logits flag must
  // not make two equal losses compare unequal.
  if (config.kind == LossConfig::Kind::kMeanSquaredError) config.from_logits = false;
  return config;
}

json LossConfigToKeras(const LossConfig& config) {
  static const char* const kClassNames[] = {"SparseCategoricalCrossentropy",
                                            "CategoricalCrossentropy", "MeanSquaredError",
                                            "BinaryCrossentropy"};
  json out;
  out["class_name"] = kClassNames[static_cast<int>(config.kind)];
  json cfg = json::object();
  if (config.kind != LossConfig::Kind::kMeanSquaredError) cfg["from_logits"] = config.from_logits;
  out["config"] = cfg;
  return out;
}

}  // namespace pstrain
