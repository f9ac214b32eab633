#include "common/model/model.h"

#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/layers/input_layer.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using json = nlohmann::json;

namespace {

absl::Status Bad(const std::string& what, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg));
}

// A config a layer entry without one reads as.
const json& EmptyObject() {
  static const json* const empty = new json(json::object());
  return *empty;
}

absl::Status Prefixed(const std::string& what, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

// The model-level declared input shape: Keras 2's build_input_shape, Keras 3's
// build_config. Empty when neither is there.
absl::StatusOr<std::vector<int64_t>> ModelInputShape(const json& keras_model,
                                                     const json& model_config) {
  auto b = model_config.find("build_input_shape");
  if (b != model_config.end() && !b->is_null()) {
    absl::StatusOr<Shape> shape = ParseKerasShape(*b, true);
    if (!shape.ok()) return Prefixed("model", shape.status());
    return *shape;
  }
  auto bc = keras_model.find("build_config");
  if (bc != keras_model.end() && bc->is_object()) {
    auto is = bc->find("input_shape");
    if (is != bc->end() && !is->is_null()) {
      absl::StatusOr<Shape> shape = ParseKerasShape(*is, true);
      if (!shape.ok()) return Prefixed("model", shape.status());
      return *shape;
    }
  }
  return std::vector<int64_t>();
}

// Keras 3 records every layer's build input shape; the first layer's is the model's input.
absl::StatusOr<std::vector<int64_t>> BuildConfigShape(const json& layer_entry,
                                                      const std::string& what) {
  auto bc = layer_entry.find("build_config");
  if (bc == layer_entry.end() || !bc->is_object()) return std::vector<int64_t>();
  auto is = bc->find("input_shape");
  if (is == bc->end() || is->is_null()) return std::vector<int64_t>();
  absl::StatusOr<Shape> shape = ParseKerasShape(*is, true);
  if (!shape.ok()) return Prefixed(what, shape.status());
  return *shape;
}

}  // namespace

// Backend memory reused across calls of the same batch size.
struct Model::Buffers {
  int64_t batch = -1;
  std::vector<DeviceBuffer> outputs;  // per layer: its output (none for views)
  std::vector<DeviceBuffer> dinputs;  // per layer: gradient w.r.t. its input, when needed
  DeviceBuffer loss_grad;             // gradient w.r.t. the last layer's output
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
                                                                Backend* backend,
                                                                const LayerRegistry& registry) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("model JSON is malformed");
  return FromKerasJson(j, backend, registry);
}

absl::StatusOr<std::unique_ptr<Model>> Model::FromKerasJson(const json& keras_model,
                                                            Backend* backend,
                                                            const LayerRegistry& registry) {
  if (!keras_model.is_object()) return Bad("model", "must be a JSON object");
  auto cn = keras_model.find("class_name");
  const std::string class_name =
      cn != keras_model.end() && cn->is_string() ? cn->get<std::string>() : "";
  if (class_name != "Sequential") {
    return Bad("model", absl::StrCat("class_name \"", class_name,
                                     "\" is unsupported (only Sequential models)"));
  }
  auto cfg_it = keras_model.find("config");
  if (cfg_it == keras_model.end()) return Bad("model", "has no \"config\"");
  const json* layers_json = nullptr;
  const json* model_config = &EmptyObject();
  if (cfg_it->is_array()) {  // very old Keras: config is the layer list
    layers_json = &*cfg_it;
  } else if (cfg_it->is_object()) {
    model_config = &*cfg_it;
    auto l = cfg_it->find("layers");
    if (l == cfg_it->end() || !l->is_array()) return Bad("model", "config has no \"layers\" list");
    layers_json = &*l;
  } else {
    return Bad("model", "\"config\" must be an object");
  }

  auto model = std::unique_ptr<Model>(new Model());
  model->backend_ = backend;
  model->name_ = "sequential";
  auto name_it = model_config->find("name");
  if (name_it != model_config->end() && !name_it->is_null()) {
    if (!name_it->is_string()) return Bad("model", "name must be a string");
    model->name_ = name_it->get<std::string>();
  }
  PS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ModelInputShape(keras_model, *model_config));
  PS_RETURN_IF_ERROR(model->AddLayers(*layers_json, std::move(shape), registry));
  return model;
}

absl::Status Model::AddLayers(const json& layers_json, std::vector<int64_t> shape,
                              const LayerRegistry& registry) {
  std::set<std::string> names;
  std::map<std::string, int> counters;
  for (size_t i = 0; i < layers_json.size(); ++i) {
    const json& entry = layers_json[i];
    std::string what = absl::StrCat("layer ", i);
    if (!entry.is_object()) return Bad(what, "must be an object");
    auto c = entry.find("class_name");
    if (c == entry.end() || !c->is_string()) return Bad(what, "has no class_name");
    const std::string lclass = c->get<std::string>();
    const json* config = &EmptyObject();
    auto cfg = entry.find("config");
    if (cfg != entry.end() && !cfg->is_null()) {
      if (!cfg->is_object()) return Bad(what, "config must be an object");
      config = &*cfg;
    }
    auto n = config->find("name");
    const std::string given_name =
        n != config->end() && n->is_string() ? n->get<std::string>() : "";
    what = absl::StrCat("layer ", i, " '", given_name, "' (", lclass, ")");
    LayerConfig reader(config, what);
    PS_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, registry.Create(lclass, reader));

    if (layer->IsInput()) {
      if (!layers_.empty()) return Bad(what, "an InputLayer after other layers is unsupported");
      if (!layer->declared_input_shape().empty()) shape = layer->declared_input_shape();
      input_name_ = layer->name();
      continue;
    }
    if (layers_.empty()) {
      PS_ASSIGN_OR_RETURN(std::vector<int64_t> built, BuildConfigShape(entry, what));
      if (!layer->declared_input_shape().empty()) {
        shape = layer->declared_input_shape();
      } else if (!built.empty()) {
        shape = built;
      }
      if (shape.empty()) {
        return Bad(what, "the model's input size is unknown; declare an InputLayer or "
                         "input_shape on the first layer");
      }
      input_shape_ = shape;
    }
    std::string lname = layer->name();
    if (lname.empty()) {
      // Keras's naming: snake_case class name, then _1, _2, ... per class.
      const std::string base = registry.DefaultName(lclass);
      int& count = counters[base];
      do {
        lname = count == 0 ? base : absl::StrCat(base, "_", count);
        ++count;
      } while (names.count(lname) > 0);
      layer->set_name(lname);
      what = absl::StrCat("layer ", i, " '", lname, "' (", lclass, ")");
    }
    if (!names.insert(lname).second) {
      return Bad(what, absl::StrCat("duplicate layer name \"", lname, "\""));
    }
    absl::Status built = layer->Build(shape);
    if (!built.ok()) {
      return Bad(what, absl::StrCat("on an input of shape ", ShapeToString(shape), ": ",
                                    built.message()));
    }
    shape = layer->output_shape();
    PS_RETURN_IF_ERROR(AddLayer(std::move(layer), what));
  }
  if (layers_.empty()) return Bad("model", "has no layers besides the input");
  input_size_ = NumElements(input_shape_);
  output_size_ = NumElements(layers_.back()->output_shape());
  first_param_ = layers_.size();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i]->variables().empty()) {
      first_param_ = i;
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status Model::AddLayer(std::unique_ptr<Layer> layer, const std::string& what) {
  if (!layer->HasInputGradient() && !layers_.empty()) {
    return Bad(what, "must be the first layer (no gradient flows into its input)");
  }
  first_variable_.push_back(static_cast<int>(variables_.size()));
  for (const LayerVariable& v : layer->variables()) {
    VariableSpec spec;
    spec.name = absl::StrCat(layer->name(), "/", v.name);
    spec.shape = v.shape;
    spec.trainable = v.trainable;
    spec.moving_average_momentum = v.moving_average_momentum;
    spec.layer = static_cast<int>(layers_.size());
    if (spec.trainable) trainable_.push_back(spec);
    variables_.push_back(std::move(spec));
    initializers_.push_back(v.initializer);
  }
  layers_.push_back(std::move(layer));
  return absl::OkStatus();
}

absl::Status Model::SetLoss(const LossConfig& loss) {
  using K = LossConfig::Kind;
  const bool categorical =
      loss.kind == K::kSparseCategoricalCrossentropy || loss.kind == K::kCategoricalCrossentropy;
  if (categorical && output_shape().size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        LossName(loss.kind), " needs an output of shape [classes], the model's is ",
        ShapeToString(output_shape()), "; add a Flatten or global pooling layer"));
  }
  loss_ = loss;
  has_loss_ = true;
  const Activation last = layers_.back()->output_activation();
  fused_ = false;
  switch (loss.kind) {
    case K::kSparseCategoricalCrossentropy:
    case K::kCategoricalCrossentropy: {
      const bool sparse = loss.kind == K::kSparseCategoricalCrossentropy;
      if (loss.from_logits) {
        loss_kind_ = sparse ? LossKind::kSoftmaxSparseCrossEntropy : LossKind::kSoftmaxCrossEntropy;
      } else if (last == Activation::kSoftmax) {
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
      } else if (last == Activation::kSigmoid) {
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
  for (size_t v = 0; v < variables_.size(); ++v) {
    const RowInitializer init = InitialValuesOf(v, seed);
    Tensor value(variables_[v].shape);
    FillRows(init, 0, variables_[v].shape.empty() ? 1 : variables_[v].shape[0], value.values());
    out.push_back(std::move(value));
  }
  return out;
}

RowInitializer Model::InitialValuesOf(size_t v, uint64_t seed) const {
  return initializers_[v].ForVariable(variables_[v].shape,
                                      VariableSeed(seed, variables_[v].name));
}

json Model::ToKerasJson() const {
  json layers = json::array();
  layers.push_back(
      InputLayer::KerasEntry(input_name_.empty() ? "input_layer" : input_name_, input_shape_));
  for (const auto& layer : layers_) layers.push_back(layer->ToKeras());
  return {{"module", "keras"},
          {"class_name", "Sequential"},
          {"config",
           {{"name", name_},
            {"trainable", true},
            {"dtype", Float32Policy()},
            {"layers", layers},
            {"build_input_shape", BatchShapeJson(input_shape_)}}},
          {"registered_name", nullptr},
          {"build_config", {{"input_shape", BatchShapeJson(input_shape_)}}}};
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
  return layers_.front()->CheckInput(x.values());
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
    b.dinputs.clear();
    b.outputs.resize(n);
    b.dinputs.resize(n);
    for (size_t i = 0; i < n; ++i) {
      Layer& l = *layers_[i];
      PS_RETURN_IF_ERROR(l.Prepare(backend_, batch));
      if (l.IsView()) continue;
      PS_ASSIGN_OR_RETURN(b.outputs[i], backend_->Allocate(batch * NumElements(l.output_shape())));
      if (i > first_param_ && l.HasInputGradient()) {
        PS_ASSIGN_OR_RETURN(b.dinputs[i], backend_->Allocate(batch * NumElements(l.input_shape())));
      }
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

absl::Status Model::LoadInputs(absl::Span<const Tensor> weights, const Tensor& x) {
  Buffers& b = *buffers_;
  if (backend_->IsHostMemory()) {
    b.x_ptr = x.data();
    for (size_t v = 0; v < weights.size(); ++v) b.weight_ptr[v] = weights[v].data();
    return absl::OkStatus();
  }
  PS_RETURN_IF_ERROR(backend_->CopyToDevice(x.data(), b.batch * input_size_, b.x.data()));
  b.x_ptr = b.x.data();
  for (size_t v = 0; v < weights.size(); ++v) {
    PS_RETURN_IF_ERROR(backend_->CopyToDevice(weights[v].data(), weights[v].num_elements(),
                                              b.weights[v].data()));
    b.weight_ptr[v] = b.weights[v].data();
  }
  return absl::OkStatus();
}

const float* Model::Forward(bool training, uint64_t dropout_seed, bool fused) {
  Buffers& b = *buffers_;
  const float* in = b.x_ptr;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = *layers_[i];
    ForwardPass pass;
    pass.backend = backend_;
    pass.batch = b.batch;
    pass.input = in;
    pass.output = b.outputs[i].data();
    pass.weights = absl::MakeConstSpan(b.weight_ptr.data() + first_variable_[i],
                                       l.variables().size());
    pass.training = training;
    // A distinct stream per layer so two Dropout layers do not share a mask.
    pass.seed = MixSeed(dropout_seed, i);
    pass.skip_activation = fused && i + 1 == layers_.size();
    in = l.Forward(pass);
    b.layer_out[i] = in;
  }
  return in;
}

void Model::Backward() {
  Buffers& b = *buffers_;
  float* dy = b.loss_grad.data();
  // Layers before the first one with variables need no gradient: stop there.
  for (size_t i = layers_.size(); i-- > first_param_;) {
    Layer& l = *layers_[i];
    BackwardPass pass;
    pass.backend = backend_;
    pass.batch = b.batch;
    pass.input = i == 0 ? b.x_ptr : b.layer_out[i - 1];
    pass.output = b.layer_out[i];
    pass.dy = dy;
    pass.dx = i > first_param_ ? b.dinputs[i].data() : nullptr;
    const size_t count = l.variables().size();
    pass.weights = absl::MakeConstSpan(b.weight_ptr.data() + first_variable_[i], count);
    pass.gradients = absl::MakeConstSpan(b.grad_ptr.data() + first_variable_[i], count);
    pass.skip_activation = fused_ && i + 1 == layers_.size();
    dy = l.Backward(pass);
  }
}

absl::StatusOr<StepResult> Model::Run(absl::Span<const Tensor> weights, const Tensor& x,
                                      const Tensor& y, bool training, uint64_t dropout_seed,
                                      std::vector<Tensor>* gradients) {
  PS_RETURN_IF_ERROR(CheckWeightsAndX(weights, x));
  const int64_t batch = x.shape()[0];
  PS_RETURN_IF_ERROR(CheckY(y, batch));
  PS_RETURN_IF_ERROR(PrepareBuffers(batch));
  PS_RETURN_IF_ERROR(LoadInputs(weights, x));
  Buffers& b = *buffers_;
  const bool host = backend_->IsHostMemory();

  const float* pred = Forward(training, dropout_seed, fused_);
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
    Backward();
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
  PS_RETURN_IF_ERROR(LoadInputs(weights, x));
  const float* out = Forward(/*training=*/false, 0, /*fused=*/false);
  std::vector<int64_t> shape = {batch};
  for (int64_t d : output_shape()) shape.push_back(d);
  Tensor result(std::move(shape));
  PS_RETURN_IF_ERROR(backend_->CopyToHost(out, result.num_elements(), result.data()));
  PS_RETURN_IF_ERROR(backend_->Synchronize());
  return result;
}

}  // namespace pstrain
