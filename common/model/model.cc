#include "common/model/model.h"

#include <cctype>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace pstrain {

using json = nlohmann::json;

namespace {

// Keras's initializers, reduced to one parameterized form.
struct Initializer {
  enum class Kind { kConstant, kNormal, kTruncatedNormal, kUniform, kVarianceScaling };
  Kind kind = Kind::kConstant;
  double a = 0.0;  // constant value | mean | minval
  double b = 0.0;  // stddev | maxval
  // VarianceScaling.
  double scale = 1.0;
  enum class Mode { kFanIn, kFanOut, kFanAvg } mode = Mode::kFanAvg;
  enum class Dist { kTruncatedNormal, kUntruncatedNormal, kUniform } dist = Dist::kUniform;
  bool has_seed = false;
  uint64_t seed = 0;
};

uint64_t Mix(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + (index + 1) * 0xD1B54A32D192ED03ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Our own distributions over mt19937_64 so values do not depend on the standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform() { return static_cast<double>(gen_() >> 11) * (1.0 / 9007199254740992.0); }
  double Normal() {  // Box-Muller
    double u1 = Uniform();
    while (u1 <= 0.0) u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double TruncatedNormal() {  // re-draw outside two standard deviations, as TF does
    for (;;) {
      const double z = Normal();
      if (std::fabs(z) <= 2.0) return z;
    }
  }

 private:
  std::mt19937_64 gen_;
};

void Fill(const Initializer& init, const std::vector<int64_t>& shape, uint64_t seed,
          std::vector<float>* out) {
  Rng rng(seed);
  double fan_in = 1.0, fan_out = 1.0;
  if (shape.size() == 1) {
    fan_in = fan_out = static_cast<double>(shape[0]);
  } else if (shape.size() == 2) {
    fan_in = static_cast<double>(shape[0]);
    fan_out = static_cast<double>(shape[1]);
  }
  for (float& v : *out) {
    double x = 0.0;
    switch (init.kind) {
      case Initializer::Kind::kConstant:
        x = init.a;
        break;
      case Initializer::Kind::kNormal:
        x = init.a + init.b * rng.Normal();
        break;
      case Initializer::Kind::kTruncatedNormal:
        x = init.a + init.b * rng.TruncatedNormal();
        break;
      case Initializer::Kind::kUniform:
        x = init.a + (init.b - init.a) * rng.Uniform();
        break;
      case Initializer::Kind::kVarianceScaling: {
        double fan = fan_in;
        if (init.mode == Initializer::Mode::kFanOut) fan = fan_out;
        if (init.mode == Initializer::Mode::kFanAvg) fan = (fan_in + fan_out) / 2.0;
        const double scale = init.scale / std::max(1.0, fan);
        switch (init.dist) {
          case Initializer::Dist::kTruncatedNormal:
            // 0.8796...: stddev of a unit normal truncated to [-2, 2] (Keras's constant).
            x = std::sqrt(scale) / 0.87962566103423978 * rng.TruncatedNormal();
            break;
          case Initializer::Dist::kUntruncatedNormal:
            x = std::sqrt(scale) * rng.Normal();
            break;
          case Initializer::Dist::kUniform: {
            const double limit = std::sqrt(3.0 * scale);
            x = -limit + 2.0 * limit * rng.Uniform();
            break;
          }
        }
        break;
      }
    }
    v = static_cast<float>(x);
  }
}


// Context for error messages: "layer 'dense_1' (Dense)".
struct Ctx {
  std::string what;
};

absl::Status Bad(const Ctx& ctx, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(ctx.what, ": ", msg));
}

absl::StatusOr<double> GetNumber(const json& obj, const char* key, double def, const Ctx& ctx) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_number()) return Bad(ctx, absl::StrCat(key, " must be a number, got ", it->dump()));
  return it->get<double>();
}

absl::StatusOr<std::string> GetString(const json& obj, const char* key, const std::string& def,
                                      const Ctx& ctx) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_string()) return Bad(ctx, absl::StrCat(key, " must be a string, got ", it->dump()));
  return it->get<std::string>();
}

absl::StatusOr<bool> GetBool(const json& obj, const char* key, bool def, const Ctx& ctx) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_boolean()) return Bad(ctx, absl::StrCat(key, " must be a bool, got ", it->dump()));
  return it->get<bool>();
}

absl::StatusOr<Initializer> ParseInitializer(const json& v, const char* field, const Ctx& outer) {
  const Ctx ctx{absl::StrCat(outer.what, " ", field)};
  std::string class_name;
  json config = json::object();
  if (v.is_string()) {
    class_name = v.get<std::string>();
  } else if (v.is_object()) {
    PS_ASSIGN_OR_RETURN(class_name, GetString(v, "class_name", "", ctx));
    auto it = v.find("config");
    if (it != v.end() && !it->is_null()) {
      if (!it->is_object()) return Bad(ctx, "config must be an object");
      config = *it;
    }
  } else {
    return Bad(ctx, absl::StrCat("must be a string or a config object, got ", v.dump()));
  }
  Initializer init;
  auto seed_it = config.find("seed");
  if (seed_it != config.end() && !seed_it->is_null()) {
    if (!seed_it->is_number_integer()) {
      return Bad(ctx, absl::StrCat("seed must be an integer or null, got ", seed_it->dump()));
    }
    init.has_seed = true;
    init.seed = seed_it->is_number_unsigned() ? seed_it->get<uint64_t>()
                                              : static_cast<uint64_t>(seed_it->get<int64_t>());
  }
  using K = Initializer::Kind;
  using M = Initializer::Mode;
  using D = Initializer::Dist;
  const std::string c = CanonicalKerasName(class_name);
  auto vs = [&init](double scale, M mode, D dist) {
    init.kind = K::kVarianceScaling;
    init.scale = scale;
    init.mode = mode;
    init.dist = dist;
  };
  if (c == "glorotuniform") {
    vs(1.0, M::kFanAvg, D::kUniform);
  } else if (c == "glorotnormal") {
    vs(1.0, M::kFanAvg, D::kTruncatedNormal);
  } else if (c == "henormal") {
    vs(2.0, M::kFanIn, D::kTruncatedNormal);
  } else if (c == "heuniform") {
    vs(2.0, M::kFanIn, D::kUniform);
  } else if (c == "lecunnormal") {
    vs(1.0, M::kFanIn, D::kTruncatedNormal);
  } else if (c == "lecununiform") {
    vs(1.0, M::kFanIn, D::kUniform);
  } else if (c == "zeros" || c == "zero") {
    init.kind = K::kConstant;
    init.a = 0.0;
  } else if (c == "ones" || c == "one") {
    init.kind = K::kConstant;
    init.a = 1.0;
  } else if (c == "constant") {
    init.kind = K::kConstant;
    PS_ASSIGN_OR_RETURN(init.a, GetNumber(config, "value", 0.0, ctx));
  } else if (c == "randomnormal") {
    init.kind = K::kNormal;
    PS_ASSIGN_OR_RETURN(init.a, GetNumber(config, "mean", 0.0, ctx));
    PS_ASSIGN_OR_RETURN(init.b, GetNumber(config, "stddev", 0.05, ctx));
  } else if (c == "truncatednormal") {
    init.kind = K::kTruncatedNormal;
    PS_ASSIGN_OR_RETURN(init.a, GetNumber(config, "mean", 0.0, ctx));
    PS_ASSIGN_OR_RETURN(init.b, GetNumber(config, "stddev", 0.05, ctx));
  } else if (c == "randomuniform") {
    init.kind = K::kUniform;
    PS_ASSIGN_OR_RETURN(init.a, GetNumber(config, "minval", -0.05, ctx));
    PS_ASSIGN_OR_RETURN(init.b, GetNumber(config, "maxval", 0.05, ctx));
  } else if (c == "variancescaling") {
    double scale;
    PS_ASSIGN_OR_RETURN(scale, GetNumber(config, "scale", 1.0, ctx));
    std::string mode, dist;
    PS_ASSIGN_OR_RETURN(mode, GetString(config, "mode", "fan_in", ctx));
    PS_ASSIGN_OR_RETURN(dist, GetString(config, "distribution", "truncated_normal", ctx));
    M m;
    if (mode == "fan_in") {
      m = M::kFanIn;
    } else if (mode == "fan_out") {
      m = M::kFanOut;
    } else if (mode == "fan_avg") {
      m = M::kFanAvg;
    } else {
      return Bad(ctx, absl::StrCat("unsupported mode \"", mode, "\""));
    }
    D d;
    if (dist == "truncated_normal" || dist == "normal") {  // Keras 2 "normal" is truncated
      d = D::kTruncatedNormal;
    } else if (dist == "untruncated_normal") {
      d = D::kUntruncatedNormal;
    } else if (dist == "uniform") {
      d = D::kUniform;
    } else {
      return Bad(ctx, absl::StrCat("unsupported distribution \"", dist, "\""));
    }
    if (scale <= 0.0) return Bad(ctx, "scale must be positive");
    vs(scale, m, d);
  } else {
    return Bad(ctx, absl::StrCat("unsupported initializer \"", class_name, "\""));
  }
  return init;
}

absl::StatusOr<Activation> ParseActivation(const json& v, const Ctx& ctx) {
  std::string name;
  if (v.is_null()) {
    name = "linear";
  } else if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("config") && v["config"].is_string()) {
    // Keras 3 may wrap a built-in function: {"class_name":"function","config":"relu",...}.
    name = v["config"].get<std::string>();
  } else {
    return Bad(ctx, absl::StrCat("unsupported activation ", v.dump()));
  }
  if (name == "linear" || name.empty()) return Activation::kLinear;
  if (name == "relu") return Activation::kRelu;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "tanh") return Activation::kTanh;
  if (name == "softmax") return Activation::kSoftmax;
  return Bad(ctx, absl::StrCat("unsupported activation \"", name,
                               "\" (supported: linear, relu, sigmoid, tanh, softmax)"));
}

// Fields that would change the math if set; we support only their null/false value.
absl::Status RejectMathFields(const json& config, const Ctx& ctx) {
  static const char* const kMustBeNull[] = {
      "kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
      "bias_constraint",    "noise_shape",      "lora_rank",            "quantization_config"};
  for (const char* key : kMustBeNull) {
    auto it = config.find(key);
    if (it != config.end() && !it->is_null()) {
      return Bad(ctx, absl::StrCat(key, " is unsupported (got ", it->dump(), ")"));
    }
  }
  for (const char* key : {"sparse", "ragged"}) {
    auto it = config.find(key);
    if (it != config.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>())) {
      return Bad(ctx, absl::StrCat(key, " inputs are unsupported"));
    }
  }
  auto it = config.find("trainable");
  if (it != config.end() && !it->is_null() && !(it->is_boolean() && it->get<bool>())) {
    return Bad(ctx, "trainable=false (frozen layers) is unsupported");
  }
  return absl::OkStatus();
}

// [null, 28, 28] -> {28, 28}. `has_batch`: the first entry is the batch dimension.
absl::StatusOr<std::vector<int64_t>> ParseShape(const json& v, bool has_batch, const Ctx& ctx) {
  if (!v.is_array() || (has_batch && v.empty())) {
    return Bad(ctx, absl::StrCat("input shape must be a list, got ", v.dump()));
  }
  std::vector<int64_t> shape;
  for (size_t i = has_batch ? 1 : 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<int64_t>() <= 0) {
      return Bad(ctx, absl::StrCat("input shape ", v.dump(),
                                   " has an unknown or invalid dimension; the input size must "
                                   "be known"));
    }
    shape.push_back(v[i].get<int64_t>());
  }
  if (shape.empty()) return Bad(ctx, absl::StrCat("input shape ", v.dump(), " is a scalar"));
  return shape;
}

// Finds an input shape declared on a layer: InputLayer's batch_shape / batch_input_shape /
// input_shape, any layer's batch_input_shape (Keras 2), or Keras 3's build_config.
absl::StatusOr<std::vector<int64_t>> LayerInputShape(const json& layer, const json& config,
                                                     const Ctx& ctx) {
  for (const char* key : {"batch_shape", "batch_input_shape"}) {
    auto it = config.find(key);
    if (it != config.end() && !it->is_null()) return ParseShape(*it, true, ctx);
  }
  auto it = config.find("input_shape");
  if (it != config.end() && !it->is_null()) return ParseShape(*it, false, ctx);
  auto bc = layer.find("build_config");
  if (bc != layer.end() && bc->is_object()) {
    auto is = bc->find("input_shape");
    if (is != bc->end() && !is->is_null()) return ParseShape(*is, true, ctx);
  }
  return std::vector<int64_t>();
}

}  // namespace

struct Model::Layer {
  enum class Type { kDense, kDropout, kActivation, kFlatten };
  Type type = Type::kFlatten;
  std::string name;
  int64_t in = 0;   // elements per sample in
  int64_t out = 0;  // elements per sample out
  Activation activation = Activation::kLinear;
  bool use_bias = true;
  float rate = 0.0f;
  Initializer kernel_init;
  Initializer bias_init;
  int kernel_var = -1;
  int bias_var = -1;
};

// Backend memory reused across calls of the same batch size.
struct Model::Buffers {
  int64_t batch = -1;
  std::vector<DeviceBuffer> outputs;   // per layer: its output (Dense, Activation, Dropout)
  std::vector<DeviceBuffer> masks;     // per layer: dropout mask
  std::vector<DeviceBuffer> dinputs;   // per layer: gradient w.r.t. its input
  DeviceBuffer loss_grad;              // gradient w.r.t. the last layer's output
  DeviceBuffer loss_rows, correct_rows;
  // Only for backends whose memory is not host memory.
  DeviceBuffer x, y;
  std::vector<DeviceBuffer> weights, grads;
  // Pointers for the current call.
  std::vector<const float*> layer_out;
  std::vector<const float*> weight_ptr;
  std::vector<float*> grad_ptr;
  const float* x_ptr = nullptr;
  const float* y_ptr = nullptr;
  std::vector<float> host_loss, host_correct;
};

Model::Model() : buffers_(std::make_unique<Buffers>()) {}
Model::~Model() = default;

absl::StatusOr<std::unique_ptr<Model>> Model::FromKerasJsonText(const std::string& text,
                                                                Backend* backend) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("model JSON is malformed");
  return FromKerasJson(j, backend);
}

absl::StatusOr<std::unique_ptr<Model>> Model::FromKerasJson(const json& keras_model,
                                                            Backend* backend) {
  const Ctx top{"model"};
  if (!keras_model.is_object()) return Bad(top, "must be a JSON object");
  std::string class_name;
  PS_ASSIGN_OR_RETURN(class_name, GetString(keras_model, "class_name", "", top));
  if (class_name != "Sequential") {
    return Bad(top, absl::StrCat("class_name \"", class_name,
                                 "\" is unsupported (only Sequential models)"));
  }
  auto cfg_it = keras_model.find("config");
  if (cfg_it == keras_model.end()) return Bad(top, "has no \"config\"");
  const json* layers_json = nullptr;
  json empty_obj = json::object();
  const json* model_config = &empty_obj;
  if (cfg_it->is_array()) {  // very old Keras: config is the layer list
    layers_json = &*cfg_it;
  } else if (cfg_it->is_object()) {
    model_config = &*cfg_it;
    auto l = cfg_it->find("layers");
    if (l == cfg_it->end() || !l->is_array()) return Bad(top, "config has no \"layers\" list");
    layers_json = &*l;
  } else {
    return Bad(top, "\"config\" must be an object");
  }

  auto model = std::unique_ptr<Model>(new Model());
  model->backend_ = backend;
  PS_ASSIGN_OR_RETURN(model->name_, GetString(*model_config, "name", "sequential", top));

  // Model-level declared input shape (Keras 2 build_input_shape, Keras 3 build_config).
  std::vector<int64_t> shape;
  {
    auto b = model_config->find("build_input_shape");
    if (b != model_config->end() && !b->is_null()) {
      PS_ASSIGN_OR_RETURN(shape, ParseShape(*b, true, top));
    }
    auto bc = keras_model.find("build_config");
    if (shape.empty() && bc != keras_model.end() && bc->is_object()) {
      auto is = bc->find("input_shape");
      if (is != bc->end() && !is->is_null()) {
        PS_ASSIGN_OR_RETURN(shape, ParseShape(*is, true, top));
      }
    }
  }

  std::set<std::string> names;
  std::map<std::string, int> counters;
  bool seen_compute_layer = false;
  for (size_t i = 0; i < layers_json->size(); ++i) {
    const json& lj = (*layers_json)[i];
    Ctx ctx{absl::StrCat("layer ", i)};
    if (!lj.is_object()) return Bad(ctx, "must be an object");
    std::string lclass;
    PS_ASSIGN_OR_RETURN(lclass, GetString(lj, "class_name", "", ctx));
    const json* config = &empty_obj;
    auto c = lj.find("config");
    if (c != lj.end() && !c->is_null()) {
      if (!c->is_object()) return Bad(ctx, "config must be an object");
      config = &*c;
    }
    std::string lname;
    PS_ASSIGN_OR_RETURN(lname, GetString(*config, "name", "", ctx));
    ctx.what = absl::StrCat("layer ", i, " '", lname, "' (", lclass, ")");
    PS_RETURN_IF_ERROR(RejectMathFields(*config, ctx));

    std::vector<int64_t> declared;
    PS_ASSIGN_OR_RETURN(declared, LayerInputShape(lj, *config, ctx));
    if (lclass == "InputLayer") {
      if (seen_compute_layer) return Bad(ctx, "an InputLayer after other layers is unsupported");
      if (!declared.empty()) shape = declared;
      continue;
    }
    // Keras 3 records every layer's build input shape; only the first layer's is the
    // model's input.
    if (!seen_compute_layer) {
      if (!declared.empty()) shape = declared;
      if (shape.empty()) {
        return Bad(ctx, "the model's input size is unknown; declare an InputLayer or "
                        "input_shape on the first layer");
      }
      model->input_shape_ = shape;
    }
    seen_compute_layer = true;

    Layer layer;
    if (lclass == "Dense") {
      layer.type = Layer::Type::kDense;
    } else if (lclass == "Dropout") {
      layer.type = Layer::Type::kDropout;
    } else if (lclass == "Activation") {
      layer.type = Layer::Type::kActivation;
    } else if (lclass == "Flatten") {
      layer.type = Layer::Type::kFlatten;
    } else {
      return Bad(ctx, absl::StrCat("unsupported layer \"", lclass,
                                   "\" (supported: InputLayer, Dense, Dropout, Activation, "
                                   "Flatten)"));
    }
    if (lname.empty()) {
      // Keras's naming: snake_case class name, then _1, _2, ... per class.
      std::string base = lclass == "Dense"        ? "dense"
                         : lclass == "Dropout"    ? "dropout"
                         : lclass == "Activation" ? "activation"
                                                  : "flatten";
      int& n = counters[base];
      do {
        lname = n == 0 ? base : absl::StrCat(base, "_", n);
        ++n;
      } while (names.count(lname) > 0);
      ctx.what = absl::StrCat("layer ", i, " '", lname, "' (", lclass, ")");
    }
    if (!names.insert(lname).second) {
      return Bad(ctx, absl::StrCat("duplicate layer name \"", lname, "\""));
    }
    layer.name = lname;
    layer.in = NumElements(shape);

    switch (layer.type) {
      case Layer::Type::kDense: {
        if (shape.size() != 1) {
          return Bad(ctx, absl::StrCat("Dense on an input of shape ", ShapeToString(shape),
                                       " is unsupported; add a Flatten layer first"));
        }
        auto u = config->find("units");
        if (u == config->end() || !u->is_number_integer() || u->get<int64_t>() <= 0) {
          return Bad(ctx, "units must be a positive integer");
        }
        layer.out = u->get<int64_t>();
        auto a = config->find("activation");
        PS_ASSIGN_OR_RETURN(layer.activation,
                            ParseActivation(a == config->end() ? json() : *a, ctx));
        PS_ASSIGN_OR_RETURN(layer.use_bias, GetBool(*config, "use_bias", true, ctx));
        auto ki = config->find("kernel_initializer");
        PS_ASSIGN_OR_RETURN(layer.kernel_init,
                            ParseInitializer(ki == config->end() || ki->is_null()
                                                 ? json("glorot_uniform")
                                                 : *ki,
                                             "kernel_initializer", ctx));
        auto bi = config->find("bias_initializer");
        PS_ASSIGN_OR_RETURN(
            layer.bias_init,
            ParseInitializer(bi == config->end() || bi->is_null() ? json("zeros") : *bi,
                             "bias_initializer", ctx));
        layer.kernel_var = static_cast<int>(model->variables_.size());
        model->variables_.push_back({absl::StrCat(lname, "/kernel"), {layer.in, layer.out}});
        if (layer.use_bias) {
          layer.bias_var = static_cast<int>(model->variables_.size());
          model->variables_.push_back({absl::StrCat(lname, "/bias"), {layer.out}});
        }
        shape = {layer.out};
        break;
      }
      case Layer::Type::kDropout: {
        double rate;
        PS_ASSIGN_OR_RETURN(rate, GetNumber(*config, "rate", -1.0, ctx));
        if (!(rate >= 0.0 && rate < 1.0)) return Bad(ctx, "rate must be in [0, 1)");
        layer.rate = static_cast<float>(rate);
        layer.out = layer.in;
        break;
      }
      case Layer::Type::kActivation: {
        auto a = config->find("activation");
        if (a == config->end()) return Bad(ctx, "has no activation");
        PS_ASSIGN_OR_RETURN(layer.activation, ParseActivation(*a, ctx));
        layer.out = layer.in;
        break;
      }
      case Layer::Type::kFlatten:
        layer.out = layer.in;
        shape = {layer.in};
        break;
    }
    model->layers_.push_back(std::move(layer));
  }
  if (model->layers_.empty()) return Bad(top, "has no layers besides the input");
  model->input_size_ = model->layers_.front().in;
  model->output_size_ = model->layers_.back().out;
  return model;
}

absl::Status Model::SetLoss(const LossConfig& loss) {
  loss_ = loss;
  has_loss_ = true;
  const Layer& last = layers_.back();
  const bool last_has_act =
      last.type == Layer::Type::kDense || last.type == Layer::Type::kActivation;
  fused_ = false;
  using K = LossConfig::Kind;
  switch (loss.kind) {
    case K::kSparseCategoricalCrossentropy:
    case K::kCategoricalCrossentropy: {
      const bool sparse = loss.kind == K::kSparseCategoricalCrossentropy;
      if (loss.from_logits) {
        loss_kind_ = sparse ? LossKind::kSoftmaxSparseCrossEntropy : LossKind::kSoftmaxCrossEntropy;
      } else if (last_has_act && last.activation == Activation::kSoftmax) {
        fused_ = true;
        loss_kind_ = sparse ? LossKind::kSoftmaxSparseCrossEntropy : LossKind::kSoftmaxCrossEntropy;
      } else {
        loss_kind_ = sparse ? LossKind::kSparseCrossEntropy : LossKind::kCrossEntropy;
      }
      break;
    }
    case K::kMeanSquaredError:
      loss_kind_ = LossKind::kMeanSquaredError;
      break;
    case K::kBinaryCrossentropy:
      if (loss.from_logits) {
        loss_kind_ = LossKind::kSigmoidBinaryCrossEntropy;
      } else if (last_has_act && last.activation == Activation::kSigmoid) {
        fused_ = true;
        loss_kind_ = LossKind::kSigmoidBinaryCrossEntropy;
      } else {
        loss_kind_ = LossKind::kBinaryCrossEntropy;
      }
      break;
  }
  // Keras's "accuracy" resolution: binary for one output unit, sparse when the targets are
  // class ids, categorical otherwise.
  if (output_size_ == 1) {
    accuracy_ = AccuracyMetric::kBinary;
  } else if (loss.kind == K::kSparseCategoricalCrossentropy) {
    accuracy_ = AccuracyMetric::kSparseCategorical;
  } else {
    accuracy_ = AccuracyMetric::kCategorical;
  }
  return absl::OkStatus();
}

std::vector<Tensor> Model::InitialValues(uint64_t seed) const {
  std::vector<Tensor> out;
  out.reserve(variables_.size());
  for (const VariableSpec& v : variables_) out.emplace_back(v.shape);
  for (const Layer& layer : layers_) {
    if (layer.type != Layer::Type::kDense) continue;
    auto fill = [&](int var, const Initializer& init) {
      std::vector<float> values(out[var].num_elements());
      const uint64_t s = init.has_seed ? init.seed : Mix(seed, static_cast<uint64_t>(var));
      Fill(init, variables_[var].shape, s, &values);
      out[var] = Tensor(variables_[var].shape, std::move(values));
    };
    fill(layer.kernel_var, layer.kernel_init);
    if (layer.bias_var >= 0) fill(layer.bias_var, layer.bias_init);
  }
  return out;
}

absl::Status Model::CheckWeightsAndX(absl::Span<const Tensor> weights, const Tensor& x) const {
  if (backend_ == nullptr) {
    return absl::FailedPreconditionError("model was built without a backend");
  }
  if (weights.size() != variables_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", weights.size(), " weights, model ",
                                                   name_, " has ", variables_.size()));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i].shape() != variables_[i].shape ||
        weights[i].num_elements() != NumElements(variables_[i].shape)) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight ", variables_[i].name, " has shape ", weights[i].ShapeString(),
                       ", want ", ShapeToString(variables_[i].shape)));
    }
  }
  const auto& xs = x.shape();
  bool ok = xs.size() >= 2 && xs[0] >= 1 && x.num_elements() == NumElements(xs);
  if (ok) {
    const std::vector<int64_t> rest(xs.begin() + 1, xs.end());
    ok = rest == input_shape_ || (rest.size() == 1 && rest[0] == input_size_);
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("x has shape ", x.ShapeString(), ", want [B,",
                     absl::StrJoin(input_shape_, ","), "] or [B,", input_size_, "] with B >= 1"));
  }
  return absl::OkStatus();
}

absl::Status Model::CheckY(const Tensor& y, int64_t batch) const {
  if (!has_loss_) return absl::FailedPreconditionError("no loss set; call SetLoss first");
  const auto& ys = y.shape();
  const bool sparse = loss_.kind == LossConfig::Kind::kSparseCategoricalCrossentropy;
  bool ok;
  if (sparse) {
    ok = (ys.size() == 1 && ys[0] == batch) ||
         (ys.size() == 2 && ys[0] == batch && ys[1] == 1);
  } else {
    ok = (ys.size() == 2 && ys[0] == batch && ys[1] == output_size_) ||
         (output_size_ == 1 && ys.size() == 1 && ys[0] == batch);
  }
  ok = ok && y.num_elements() == NumElements(ys);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "y has shape ", y.ShapeString(), ", want ",
        sparse ? absl::StrCat("[", batch, "] class ids for ", LossName(loss_.kind))
               : absl::StrCat("[", batch, ",", output_size_, "] for ", LossName(loss_.kind))));
  }
  if (sparse) {
    const float* v = y.data();
    for (int64_t r = 0; r < batch; ++r) {
      if (!(v[r] >= 0.0f && v[r] < static_cast<float>(output_size_)) ||
          v[r] != std::floor(v[r])) {
        return absl::InvalidArgumentError(absl::StrCat("label ", v[r], " at row ", r,
                                                       " is not a class id in [0,",
                                                       output_size_, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Model::PrepareBuffers(int64_t batch) {
  Buffers& b = *buffers_;
  const bool host = backend_->IsHostMemory();
  if (b.batch != batch) {
    b.batch = -1;
    const size_t n = layers_.size();
    b.outputs.clear();
    b.masks.clear();
    b.dinputs.clear();
    b.outputs.resize(n);
    b.masks.resize(n);
    b.dinputs.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const Layer& l = layers_[i];
      if (l.type != Layer::Type::kFlatten) {
        PS_ASSIGN_OR_RETURN(b.outputs[i], backend_->Allocate(batch * l.out));
      }
      if (l.type == Layer::Type::kDropout) {
        PS_ASSIGN_OR_RETURN(b.masks[i], backend_->Allocate(batch * l.out));
      }
      PS_ASSIGN_OR_RETURN(b.dinputs[i], backend_->Allocate(batch * l.in));
    }
    PS_ASSIGN_OR_RETURN(b.loss_grad, backend_->Allocate(batch * output_size_));
    PS_ASSIGN_OR_RETURN(b.loss_rows, backend_->Allocate(batch));
    PS_ASSIGN_OR_RETURN(b.correct_rows, backend_->Allocate(batch));
    b.host_loss.assign(batch, 0.0f);
    b.host_correct.assign(batch, 0.0f);
    if (!host) {
      PS_ASSIGN_OR_RETURN(b.x, backend_->Allocate(batch * input_size_));
      PS_ASSIGN_OR_RETURN(b.y, backend_->Allocate(batch * output_size_));
    }
    b.batch = batch;
  }
  if (!host && b.weights.size() != variables_.size()) {
    b.weights.clear();
    b.grads.clear();
    for (const VariableSpec& v : variables_) {
      DeviceBuffer w, g;
      PS_ASSIGN_OR_RETURN(w, backend_->Allocate(NumElements(v.shape)));
      PS_ASSIGN_OR_RETURN(g, backend_->Allocate(NumElements(v.shape)));
      b.weights.push_back(std::move(w));
      b.grads.push_back(std::move(g));
    }
  }
  b.layer_out.assign(layers_.size(), nullptr);
  b.weight_ptr.assign(variables_.size(), nullptr);
  b.grad_ptr.assign(variables_.size(), nullptr);
  return absl::OkStatus();
}

absl::StatusOr<const float*> Model::Forward(absl::Span<const Tensor> weights, const Tensor& x,
                                            bool training, uint64_t dropout_seed, bool fused) {
  Buffers& b = *buffers_;
  const int64_t batch = b.batch;
  if (backend_->IsHostMemory()) {
    b.x_ptr = x.data();
    for (size_t v = 0; v < weights.size(); ++v) b.weight_ptr[v] = weights[v].data();
  } else {
    PS_RETURN_IF_ERROR(backend_->CopyToDevice(x.data(), batch * input_size_, b.x.data()));
    b.x_ptr = b.x.data();
    for (size_t v = 0; v < weights.size(); ++v) {
      PS_RETURN_IF_ERROR(backend_->CopyToDevice(weights[v].data(), weights[v].num_elements(),
                                                b.weights[v].data()));
      b.weight_ptr[v] = b.weights[v].data();
    }
  }
  const float* in = b.x_ptr;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    const bool skip_act = fused && i + 1 == layers_.size();
    float* out = b.outputs[i].data();
    switch (l.type) {
      case Layer::Type::kDense:
        backend_->Gemm(false, false, batch, l.out, l.in, 1.0f, in, b.weight_ptr[l.kernel_var],
                       0.0f, out);
        if (l.bias_var >= 0) backend_->AddBias(batch, l.out, b.weight_ptr[l.bias_var], out);
        if (!skip_act && l.activation != Activation::kLinear) {
          backend_->ActivationForward(l.activation, batch, l.out, out, out);
        }
        b.layer_out[i] = out;
        break;
      case Layer::Type::kActivation:
        if (skip_act) {
          b.layer_out[i] = in;
        } else {
          backend_->ActivationForward(l.activation, batch, l.out, in, out);
          b.layer_out[i] = out;
        }
        break;
      case Layer::Type::kDropout:
        if (training && l.rate > 0.0f) {
          // A distinct stream per layer so two Dropout layers do not share a mask.
          backend_->DropoutForward(batch * l.out, l.rate, Mix(dropout_seed, i), in,
                                   b.masks[i].data(), out);
          b.layer_out[i] = out;
        } else {
          b.layer_out[i] = in;
        }
        break;
      case Layer::Type::kFlatten:
        b.layer_out[i] = in;
        break;
    }
    in = b.layer_out[i];
  }
  return in;
}

absl::StatusOr<StepResult> Model::Run(absl::Span<const Tensor> weights, const Tensor& x,
                                      const Tensor& y, bool training, uint64_t dropout_seed,
                                      std::vector<Tensor>* gradients) {
  PS_RETURN_IF_ERROR(CheckWeightsAndX(weights, x));
  const int64_t batch = x.shape()[0];
  PS_RETURN_IF_ERROR(CheckY(y, batch));
  PS_RETURN_IF_ERROR(PrepareBuffers(batch));
  Buffers& b = *buffers_;
  const bool host = backend_->IsHostMemory();

  const float* pred;
  PS_ASSIGN_OR_RETURN(pred, Forward(weights, x, training, dropout_seed, fused_));
  if (host) {
    b.y_ptr = y.data();
  } else {
    PS_RETURN_IF_ERROR(backend_->CopyToDevice(y.data(), y.num_elements(), b.y.data()));
    b.y_ptr = b.y.data();
  }
  const int64_t k = output_size_;
  backend_->LossForwardBackward(loss_kind_, batch, k, pred, b.y_ptr,
                                1.0f / static_cast<float>(batch), b.loss_rows.data(),
                                training ? b.loss_grad.data() : nullptr);
  AccuracyKind acc = AccuracyKind::kCategorical;
  if (accuracy_ == AccuracyMetric::kSparseCategorical) acc = AccuracyKind::kSparseCategorical;
  if (accuracy_ == AccuracyMetric::kBinary) acc = AccuracyKind::kBinary;
  // Keras thresholds the model's output at 0.5; a fused sigmoid's output is its logit, and
  // sigmoid(z) > 0.5 exactly when z > 0.
  const float threshold = fused_ ? 0.0f : 0.5f;
  backend_->CountCorrect(acc, batch, k, pred, b.y_ptr, threshold, b.correct_rows.data());

  if (training) {
    if (gradients->size() != variables_.size()) gradients->resize(variables_.size());
    for (size_t v = 0; v < variables_.size(); ++v) {
      if ((*gradients)[v].shape() != variables_[v].shape ||
          (*gradients)[v].num_elements() != NumElements(variables_[v].shape)) {
        (*gradients)[v] = Tensor(variables_[v].shape);
      }
      b.grad_ptr[v] = host ? (*gradients)[v].data() : b.grads[v].data();
    }
    // Layers before the first Dense have no parameters upstream: no need to go further.
    size_t first_param = layers_.size();
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (layers_[i].type == Layer::Type::kDense) {
        first_param = i;
        break;
      }
    }
    float* dy = b.loss_grad.data();
    for (size_t i = layers_.size(); i-- > first_param;) {
      const Layer& l = layers_[i];
      const bool last = i + 1 == layers_.size();
      const float* in = i == 0 ? b.x_ptr : b.layer_out[i - 1];
      float* dx = b.dinputs[i].data();
      switch (l.type) {
        case Layer::Type::kDense:
          if (!(fused_ && last) && l.activation != Activation::kLinear) {
            backend_->ActivationBackward(l.activation, batch, l.out, b.layer_out[i], dy, dy);
          }
          backend_->Gemm(true, false, l.in, l.out, batch, 1.0f, in, dy, 0.0f,
                         b.grad_ptr[l.kernel_var]);
          if (l.bias_var >= 0) backend_->ColumnSums(batch, l.out, dy, b.grad_ptr[l.bias_var]);
          if (i > first_param) {
            backend_->Gemm(false, true, batch, l.in, l.out, 1.0f, dy,
                           b.weight_ptr[l.kernel_var], 0.0f, dx);
          }
          break;
        case Layer::Type::kActivation:
          if (fused_ && last) {
            dx = dy;
          } else {
            backend_->ActivationBackward(l.activation, batch, l.out, b.layer_out[i], dy, dx);
          }
          break;
        case Layer::Type::kDropout:
          if (l.rate > 0.0f) {
            backend_->Multiply(batch * l.out, dy, b.masks[i].data(), dx);
          } else {
            dx = dy;
          }
          break;
        case Layer::Type::kFlatten:
          dx = dy;
          break;
      }
      dy = dx;
    }
    if (!host) {
      for (size_t v = 0; v < variables_.size(); ++v) {
        PS_RETURN_IF_ERROR(backend_->CopyToHost(b.grads[v].data(),
                                                (*gradients)[v].num_elements(),
                                                (*gradients)[v].data()));
      }
    }
  }
  PS_RETURN_IF_ERROR(backend_->CopyToHost(b.loss_rows.data(), batch, b.host_loss.data()));
  PS_RETURN_IF_ERROR(backend_->CopyToHost(b.correct_rows.data(), batch, b.host_correct.data()));
  PS_RETURN_IF_ERROR(backend_->Synchronize());
  StepResult result;
  result.samples = batch;
  for (int64_t r = 0; r < batch; ++r) {
    result.loss_sum += b.host_loss[r];
    result.correct += b.host_correct[r] > 0.5f ? 1 : 0;
  }
  return result;
}

absl::StatusOr<StepResult> Model::TrainStep(absl::Span<const Tensor> weights, const Tensor& x,
                                            const Tensor& y, uint64_t dropout_seed,
                                            std::vector<Tensor>* gradients) {
  if (gradients == nullptr) return absl::InvalidArgumentError("gradients must not be null");
  return Run(weights, x, y, /*training=*/true, dropout_seed, gradients);
}

absl::StatusOr<StepResult> Model::Evaluate(absl::Span<const Tensor> weights, const Tensor& x,
                                           const Tensor& y) {
  return Run(weights, x, y, /*training=*/false, 0, nullptr);
}

absl::StatusOr<Tensor> Model::Predict(absl::Span<const Tensor> weights, const Tensor& x) {
  PS_RETURN_IF_ERROR(CheckWeightsAndX(weights, x));
  const int64_t batch = x.shape()[0];
  PS_RETURN_IF_ERROR(PrepareBuffers(batch));
  const float* out;
  PS_ASSIGN_OR_RETURN(out, Forward(weights, x, /*training=*/false, 0, /*fused=*/false));
  Tensor result({batch, output_size_});
  PS_RETURN_IF_ERROR(backend_->CopyToHost(out, result.num_elements(), result.data()));
  PS_RETURN_IF_ERROR(backend_->Synchronize());
  return result;
}

}  // namespace pstrain
