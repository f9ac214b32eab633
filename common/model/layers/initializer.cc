#include "common/model/layers/initializer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model/loss.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

absl::StatusOr<double> Number(const json& config, const char* key, double def) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return def;
  if (!it->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(key, " must be a number, got ", it->dump()));
  }
  return it->get<double>();
}

absl::StatusOr<std::string> String(const json& config, const char* key, const char* def) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::string(def);
  if (!it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(key, " must be a string, got ", it->dump()));
  }
  return it->get<std::string>();
}

// A Keras initializer value is a class name, or {"class_name", "config"} (Keras 3 adds
// "module" and "registered_name").
absl::Status SplitKerasValue(const json& v, std::string* class_name, json* config) {
  if (v.is_string()) {
    *class_name = v.get<std::string>();
    return absl::OkStatus();
  }
  if (!v.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("must be a name or a config object, got ", v.dump()));
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "class_name" && it.key() != "config" && it.key() != "module" &&
        it.key() != "registered_name") {
      return absl::InvalidArgumentError(absl::StrCat("unknown key \"", it.key(), "\""));
    }
  }
  PS_ASSIGN_OR_RETURN(*class_name, String(v, "class_name", ""));
  auto it = v.find("config");
  if (it != v.end() && !it->is_null()) {
    if (!it->is_object()) return absl::InvalidArgumentError("config must be an object");
    *config = *it;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Initializer> Initializer::FromKeras(const json& v) {
  std::string class_name;
  json config = json::object();
  PS_RETURN_IF_ERROR(SplitKerasValue(v, &class_name, &config));
  Initializer init;
  PS_RETURN_IF_ERROR(init.ReadSeed(config));
  std::set<std::string> keys;
  PS_RETURN_IF_ERROR(init.ReadClass(class_name, config, &keys));
  PS_RETURN_IF_ERROR(init.CheckConfig(config, keys));
  return init;
}

absl::Status Initializer::ReadSeed(const json& config) {
  auto seed_it = config.find("seed");
  if (seed_it == config.end() || seed_it->is_null()) return absl::OkStatus();
  if (!seed_it->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("seed must be an integer or null, got ", seed_it->dump()));
  }
  has_seed_ = true;
  seed_ = seed_it->is_number_unsigned() ? seed_it->get<uint64_t>()
                                        : static_cast<uint64_t>(seed_it->get<int64_t>());
  return absl::OkStatus();
}

void Initializer::SetVarianceScaling(const char* name, double scale, Mode mode, Dist dist) {
  class_name_ = name;
  kind_ = Kind::kVarianceScaling;
  scale_ = scale;
  mode_ = mode;
  dist_ = dist;
}

absl::Status Initializer::ReadVarianceScaling(const json& config) {
  double scale;
  PS_ASSIGN_OR_RETURN(scale, Number(config, "scale", 1.0));
  std::string mode, dist;
  PS_ASSIGN_OR_RETURN(mode, String(config, "mode", "fan_in"));
  PS_ASSIGN_OR_RETURN(dist, String(config, "distribution", "truncated_normal"));
  Mode m;
  if (mode == "fan_in") {
    m = Mode::kFanIn;
  } else if (mode == "fan_out") {
    m = Mode::kFanOut;
  } else if (mode == "fan_avg") {
    m = Mode::kFanAvg;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unsupported mode \"", mode, "\""));
  }
  Dist d;
  if (dist == "truncated_normal" || dist == "normal") {  // Keras 2 "normal" is truncated
    d = Dist::kTruncatedNormal;
  } else if (dist == "untruncated_normal") {
    d = Dist::kUntruncatedNormal;
  } else if (dist == "uniform") {
    d = Dist::kUniform;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unsupported distribution \"", dist, "\""));
  }
  if (!(scale > 0.0)) return absl::InvalidArgumentError("scale must be positive");
  SetVarianceScaling("VarianceScaling", scale, m, d);
  return absl::OkStatus();
}

absl::Status Initializer::ReadClass(const std::string& class_name, const json& config,
                                    std::set<std::string>* keys) {
  const std::string c = CanonicalKerasName(class_name);
  *keys = {"seed"};
  if (c == "glorotuniform") {
    SetVarianceScaling("GlorotUniform", 1.0, Mode::kFanAvg, Dist::kUniform);
  } else if (c == "glorotnormal") {
    SetVarianceScaling("GlorotNormal", 1.0, Mode::kFanAvg, Dist::kTruncatedNormal);
  } else if (c == "henormal") {
    SetVarianceScaling("HeNormal", 2.0, Mode::kFanIn, Dist::kTruncatedNormal);
  } else if (c == "heuniform") {
    SetVarianceScaling("HeUniform", 2.0, Mode::kFanIn, Dist::kUniform);
  } else if (c == "lecunnormal") {
    SetVarianceScaling("LecunNormal", 1.0, Mode::kFanIn, Dist::kTruncatedNormal);
  } else if (c == "lecununiform") {
    SetVarianceScaling("LecunUniform", 1.0, Mode::kFanIn, Dist::kUniform);
  } else if (c == "zeros" || c == "zero") {
    class_name_ = "Zeros";
    kind_ = Kind::kConstant;
    keys->clear();
  } else if (c == "ones" || c == "one") {
    class_name_ = "Ones";
    kind_ = Kind::kConstant;
    a_ = 1.0;
    keys->clear();
  } else if (c == "constant") {
    class_name_ = "Constant";
    kind_ = Kind::kConstant;
    PS_ASSIGN_OR_RETURN(a_, Number(config, "value", 0.0));
    *keys = {"value"};
  } else if (c == "randomnormal" || c == "normal") {
    class_name_ = "RandomNormal";
    kind_ = Kind::kNormal;
    PS_ASSIGN_OR_RETURN(a_, Number(config, "mean", 0.0));
    PS_ASSIGN_OR_RETURN(b_, Number(config, "stddev", 0.05));
    *keys = {"mean", "stddev", "seed"};
  } else if (c == "truncatednormal") {
    class_name_ = "TruncatedNormal";
    kind_ = Kind::kTruncatedNormal;
    PS_ASSIGN_OR_RETURN(a_, Number(config, "mean", 0.0));
    PS_ASSIGN_OR_RETURN(b_, Number(config, "stddev", 0.05));
    *keys = {"mean", "stddev", "seed"};
  } else if (c == "randomuniform" || c == "uniform") {
    class_name_ = "RandomUniform";
    kind_ = Kind::kUniform;
    PS_ASSIGN_OR_RETURN(a_, Number(config, "minval", -0.05));
    PS_ASSIGN_OR_RETURN(b_, Number(config, "maxval", 0.05));
    *keys = {"minval", "maxval", "seed"};
  } else if (c == "variancescaling") {
    PS_RETURN_IF_ERROR(ReadVarianceScaling(config));
    *keys = {"scale", "mode", "distribution", "seed"};
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported initializer \"", class_name,
        "\" (supported: zeros, ones, constant, random_normal, random_uniform, "
        "truncated_normal, variance_scaling, glorot_*, he_*, lecun_*)"));
  }
  return absl::OkStatus();
}

absl::Status Initializer::CheckConfig(const json& config, const std::set<std::string>& keys) const {
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (keys.count(it.key()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", it.key(), "\" is not a config key of ", class_name_));
    }
  }
  if ((kind_ == Kind::kNormal || kind_ == Kind::kTruncatedNormal) && b_ < 0) {
    return absl::InvalidArgumentError("stddev must not be negative");
  }
  if (kind_ == Kind::kUniform && b_ < a_) {
    return absl::InvalidArgumentError("maxval must not be below minval");
  }
  // Every value drawn must be a finite float, as a ps checks the initializer it is sent;
  // a one-element variable (fans of 1) has the widest distribution.
  return ValidateRowRange(ForVariable({1}, 0), 0, 1);
}

Initializer DefaultInitializer(const std::string& name) {
  absl::StatusOr<Initializer> init = Initializer::FromKeras(json(name));
  return init.ok() ? *init : Initializer();
}

RowInitializer Initializer::ForVariable(const std::vector<int64_t>& shape,
                                        uint64_t variable_seed) const {
  RowInitializer out;
  out.shape = shape;
  out.seed = has_seed_ ? seed_ : variable_seed;
  switch (kind_) {
    case Kind::kConstant:
      out.distribution = InitialDistribution::kConstant;
      out.a = a_;
      return out;
    case Kind::kNormal:
      out.distribution = InitialDistribution::kNormal;
      out.a = a_;
      out.b = b_;
      return out;
    case Kind::kTruncatedNormal:
      out.distribution = InitialDistribution::kTruncatedNormal;
      out.a = a_;
      out.b = b_;
      return out;
    case Kind::kUniform:
      out.distribution = InitialDistribution::kUniform;
      out.a = a_;
      out.b = b_;
      return out;
    case Kind::kVarianceScaling:
      break;
  }
  double fan_in = 1.0, fan_out = 1.0;
  if (shape.size() == 1) {
    fan_in = fan_out = static_cast<double>(shape[0]);
  } else if (shape.size() >= 2) {
    double receptive = 1.0;
    for (size_t i = 0; i + 2 < shape.size(); ++i) receptive *= static_cast<double>(shape[i]);
    fan_in = static_cast<double>(shape[shape.size() - 2]) * receptive;
    fan_out = static_cast<double>(shape[shape.size() - 1]) * receptive;
  }
  double fan = fan_in;
  if (mode_ == Mode::kFanOut) fan = fan_out;
  if (mode_ == Mode::kFanAvg) fan = (fan_in + fan_out) / 2.0;
  const double scale = scale_ / std::max(1.0, fan);
  switch (dist_) {
    case Dist::kTruncatedNormal:
      // 0.8796...: stddev of a unit normal truncated to [-2, 2] (Keras's constant).
      out.distribution = InitialDistribution::kTruncatedNormal;
      out.b = std::sqrt(scale) / 0.87962566103423978;
      break;
    case Dist::kUntruncatedNormal:
      out.distribution = InitialDistribution::kNormal;
      out.b = std::sqrt(scale);
      break;
    case Dist::kUniform: {
      const double limit = std::sqrt(3.0 * scale);
      out.distribution = InitialDistribution::kUniform;
      out.a = -limit;
      out.b = limit;
      break;
    }
  }
  return out;
}

json Initializer::ToKeras() const {
  json config = json::object();
  const json seed = has_seed_ ? json(seed_) : json(nullptr);
  switch (kind_) {
    case Kind::kConstant:
      if (class_name_ == "Constant") config["value"] = a_;
      break;
    case Kind::kNormal:
    case Kind::kTruncatedNormal:
      config = {{"mean", a_}, {"stddev", b_}, {"seed", seed}};
      break;
    case Kind::kUniform:
      config = {{"minval", a_}, {"maxval", b_}, {"seed", seed}};
      break;
    case Kind::kVarianceScaling:
      if (class_name_ == "VarianceScaling") {
        config["scale"] = scale_;
        config["mode"] = mode_ == Mode::kFanIn    ? "fan_in"
                         : mode_ == Mode::kFanOut ? "fan_out"
                                                  : "fan_avg";
        config["distribution"] = dist_ == Dist::kTruncatedNormal     ? "truncated_normal"
                                 : dist_ == Dist::kUntruncatedNormal ? "untruncated_normal"
                                                                     : "uniform";
      }
      config["seed"] = seed;
      break;
  }
  return {{"module", "keras.initializers"},
          {"class_name", class_name_},
          {"config", config},
          {"registered_name", nullptr}};
}

bool Initializer::operator==(const Initializer& o) const {
  return class_name_ == o.class_name_ && kind_ == o.kind_ && a_ == o.a_ && b_ == o.b_ &&
         scale_ == o.scale_ && mode_ == o.mode_ && dist_ == o.dist_ &&
         has_seed_ == o.has_seed_ && seed_ == o.seed_;
}

}  // namespace pstrain
