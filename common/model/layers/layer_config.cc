#include "common/model/layers/layer_config.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

namespace {

const json& Null() {
  static const json* const kNull = new json(nullptr);
  return *kNull;
}

}  // namespace

absl::Status LayerConfig::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(what_, ": ", message));
}

bool LayerConfig::Has(const char* key) const {
  auto it = config_->find(key);
  return it != config_->end() && !it->is_null();
}

const json* LayerConfig::Find(const char* key) {
  read_.insert(key);
  auto it = config_->find(key);
  if (it == config_->end() || it->is_null()) return nullptr;
  return &*it;
}

const json& LayerConfig::Raw(const char* key) {
  const json* v = Find(key);
  return v == nullptr ? Null() : *v;
}

absl::StatusOr<int64_t> LayerConfig::Int(const char* key, int64_t def) {
  const json* v = Find(key);
  if (v == nullptr) return def;
  // Keras configs written by Python may carry 3.0 for 3; accept integral floats.
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float() && v->get<double>() == static_cast<double>(
                                  static_cast<int64_t>(v->get<double>()))) {
    return static_cast<int64_t>(v->get<double>());
  }
  return Error(absl::StrCat(key, " must be an integer, got ", v->dump()));
}

absl::StatusOr<double> LayerConfig::Number(const char* key, double def) {
  const json* v = Find(key);
  if (v == nullptr) return def;
  if (!v->is_number()) return Error(absl::StrCat(key, " must be a number, got ", v->dump()));
  return v->get<double>();
}

absl::StatusOr<bool> LayerConfig::Bool(const char* key, bool def) {
  const json* v = Find(key);
  if (v == nullptr) return def;
  if (!v->is_boolean()) return Error(absl::StrCat(key, " must be a bool, got ", v->dump()));
  return v->get<bool>();
}

absl::StatusOr<std::string> LayerConfig::String(const char* key, const std::string& def) {
  const json* v = Find(key);
  if (v == nullptr) return def;
  if (!v->is_string()) return Error(absl::StrCat(key, " must be a string, got ", v->dump()));
  return v->get<std::string>();
}

absl::StatusOr<int64_t> LayerConfig::PositiveInt(const char* key) {
  const json* v = Find(key);
  if (v == nullptr || !v->is_number_integer() || v->get<int64_t>() <= 0) {
    return Error(absl::StrCat(key, " must be a positive integer",
                              v == nullptr ? " (missing)" : absl::StrCat(", got ", v->dump())));
  }
  return v->get<int64_t>();
}

absl::StatusOr<std::vector<int64_t>> LayerConfig::IntTuple(
    const char* key, size_t n, int64_t min, std::optional<std::vector<int64_t>> def) {
  const json* v = Find(key);
  if (v == nullptr) {
    if (def.has_value()) return *def;
    return Error(absl::StrCat(key, " is required"));
  }
  std::vector<int64_t> out;
  if (v->is_number_integer()) {
    out.assign(n, v->get<int64_t>());
  } else if (v->is_array() && v->size() == n) {
    for (const json& e : *v) {
      if (!e.is_number_integer()) break;
      out.push_back(e.get<int64_t>());
    }
  }
  if (out.size() != n) {
    return Error(absl::StrCat(key, " must be an integer or a list of ", n, " integers, got ",
                              v->dump()));
  }
  for (int64_t x : out) {
    if (x < min) return Error(absl::StrCat(key, " must be >= ", min, ", got ", v->dump()));
  }
  return out;
}

absl::StatusOr<Activation> LayerConfig::ActivationValue(const char* key) {
  const json* v = Find(key);
  std::string name;
  if (v == nullptr) {
    name = "linear";
  } else if (v->is_string()) {
    name = v->get<std::string>();
  } else if (v->is_object() && v->contains("config") && (*v)["config"].is_string()) {
    // Keras 3 may wrap a built-in function: {"class_name":"function","config":"relu",...}.
    name = (*v)["config"].get<std::string>();
  } else {
    return Error(absl::StrCat("unsupported activation ", v->dump()));
  }
  if (name == "linear" || name.empty()) return Activation::kLinear;
  if (name == "relu") return Activation::kRelu;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "tanh") return Activation::kTanh;
  if (name == "softmax") return Activation::kSoftmax;
  return Error(absl::StrCat("unsupported activation \"", name,
                            "\" (supported: linear, relu, sigmoid, tanh, softmax)"));
}

absl::StatusOr<Initializer> LayerConfig::InitializerValue(const char* key, const char* def) {
  const json* v = Find(key);
  absl::StatusOr<Initializer> init = Initializer::FromKeras(v == nullptr ? json(def) : *v);
  if (!init.ok()) return Error(absl::StrCat(key, ": ", init.status().message()));
  return init;
}

absl::StatusOr<std::string> LayerConfig::Padding(const char* key) {
  PS_ASSIGN_OR_RETURN(std::string padding, String(key, "valid"));
  padding = absl::AsciiStrToLower(padding);
  if (padding != "valid" && padding != "same") {
    return Error(absl::StrCat(key, " \"", padding, "\" is unsupported (valid or same)"));
  }
  return padding;
}

absl::Status LayerConfig::ChannelsLast() {
  PS_ASSIGN_OR_RETURN(std::string format, String("data_format", "channels_last"));
  if (format != "channels_last") {
    return Error(absl::StrCat("data_format \"", format,
                              "\" is unsupported (only channels_last)"));
  }
  return absl::OkStatus();
}

absl::Status LayerConfig::Unsupported(const char* key, const json& default_value) {
  const json* v = Find(key);
  if (v == nullptr || *v == default_value) return absl::OkStatus();
  return Error(absl::StrCat(key, " is unsupported (got ", v->dump(), ")"));
}

absl::Status LayerConfig::Unsupported(const char* key) { return Unsupported(key, nullptr); }

absl::Status LayerConfig::CheckAllRead() const {
  for (auto it = config_->begin(); it != config_->end(); ++it) {
    if (read_.count(it.key()) == 0) {
      return Error(absl::StrCat("unknown config key \"", it.key(), "\""));
    }
  }
  return absl::OkStatus();
}

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kLinear:
      return "linear";
    case Activation::kRelu:
      return "relu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
    case Activation::kSoftmax:
      return "softmax";
  }
  return "linear";
}

json Float32Policy() {
  return {{"module", "keras"},
          {"class_name", "DTypePolicy"},
          {"config", {{"name", "float32"}}},
          {"registered_name", nullptr}};
}

}  // namespace pstrain
