#ifndef PSTRAIN_COMMON_MODEL_LAYERS_LAYER_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_LAYER_H_

// One Keras layer: its shapes, its variables, its forward and backward passes on a
// Backend, and its Keras config. Each layer is a class of its own (one file each in this
// folder), created from a to_json() layer entry through the LayerRegistry (registry.h);
// the Model (common/model/model.h) runs a stack of them without knowing any by name.
//
// Shapes never include the batch dimension: a Conv2D's input is {height, width, channels}
// (channels_last), a Dense's {features} or {..., features}. Tensors in a pass are
// [batch, shape...], row-major, in the backend's memory.
//
// Life cycle (single-threaded, like Model): created by a factory from its config, then
// Build(input_shape) once (declares the output shape and variables), then any number of
// Prepare(batch) (when the batch size changes; allocates scratch memory, so that the
// passes themselves never allocate), Forward and Backward.
//
// Variables: a layer declares them in Keras's order (Dense: kernel, bias; BatchNormalization:
// gamma, beta, moving_mean, moving_variance). Trainable ones get the gradient of the mean
// loss in Backward. A non-trainable one is state the layer updates itself: its "gradient"
// slot receives an observation that the variable's update rule folds in (a moving average
// with the declared momentum), so the same push, all-reduce and checkpoint paths that carry
// gradients carry it too, and the parameter servers own it like any other variable.

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/math/backend.h"
#include "common/model/layers/initializer.h"
#include "common/model/layers/layer_config.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

using Shape = std::vector<int64_t>;

struct LayerVariable {
  std::string name;  // "kernel"; the model's name for it is "<layer name>/kernel"
  Shape shape;
  Initializer initializer;
  bool trainable = true;
  // Non-trainable only: value = momentum * value + (1 - momentum) * observation.
  float moving_average_momentum = 0.0f;
};

struct ForwardPass {
  Backend* backend = nullptr;  // Not owned.
  int64_t batch = 0;
  const float* input = nullptr;  // [batch, input_shape...]
  // [batch, output_shape...], the model's buffer for this layer (null for a view layer).
  float* output = nullptr;
  absl::Span<const float* const> weights;  // this layer's variables, declaration order
  bool training = false;                   // Keras's training=True (dropout, batch stats)
  uint64_t seed = 0;                       // this layer's random stream for this step
  // The loss applies this layer's output_activation() itself (fused): compute the
  // pre-activation output (and skip the activation's backward).
  bool skip_activation = false;
};

struct BackwardPass {
  Backend* backend = nullptr;  // Not owned.
  int64_t batch = 0;
  const float* input = nullptr;   // as in the forward pass
  const float* output = nullptr;  // what Forward returned
  float* dy = nullptr;  // dLoss/d(output); the layer may overwrite it
  // Where dLoss/d(input) goes ([batch, input_shape...]); null when nothing upstream needs
  // it (the first layer with variables).
  float* dx = nullptr;
  absl::Span<const float* const> weights;
  // Per variable: trainable: dLoss/dvariable (overwritten, not accumulated); non-trainable:
  // the observation for its update rule.
  absl::Span<float* const> gradients;
  bool skip_activation = false;
};

class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Keras class name ("Dense"), as registered.
  const std::string& class_name() const { return class_name_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // The model input shape this layer's config declares (batch_input_shape, input_shape,
  // input_dim, batch_shape), empty when none.
  const Shape& declared_input_shape() const { return declared_input_shape_; }
  void set_declared_input_shape(Shape shape) { declared_input_shape_ = std::move(shape); }

  // True for InputLayer: it only declares the model's input and never runs.
  virtual bool IsInput() const { return false; }
  // True when the output is the input reinterpreted (Flatten, Reshape): Forward returns
  // `input`, Backward returns `dy`, and the model allocates no buffers for it.
  virtual bool IsView() const { return false; }
  // False when no gradient flows to the input (Embedding's integer ids): such a layer
  // must come first.
  virtual bool HasInputGradient() const { return true; }
  // The activation applied last (Dense's, an Activation or Softmax layer's), which a
  // cross-entropy loss may fold in (ForwardPass::skip_activation).
  virtual Activation output_activation() const { return Activation::kLinear; }

  // Checks the input shape, sets the output shape and declares the variables. Called once.
  // Errors: INVALID_ARGUMENT naming the layer (an input it cannot take).
  absl::Status Build(const Shape& input_shape);
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return output_shape_; }
  const std::vector<LayerVariable>& variables() const { return variables_; }

  // For the first layer only: checks the model input's host values before a pass
  // (Embedding: every id an integer in range). Errors: INVALID_ARGUMENT naming the value.
  virtual absl::Status CheckInput(absl::Span<const float> x) const { return absl::OkStatus(); }

  // Allocates scratch memory for `batch` rows on `backend`. Errors: the backend's.
  virtual absl::Status Prepare(Backend* backend, int64_t batch) { return absl::OkStatus(); }

  // Returns the output: pass.output, or pass.input for a layer that changes nothing
  // (a view, or dropout at inference).
  virtual const float* Forward(const ForwardPass& pass) = 0;
  // Writes the variables' gradients (and observations) and returns dLoss/d(input):
  // pass.dx, or pass.dy when the gradient passes through unchanged; null when pass.dx
  // is null and the layer does not pass dy through.
  virtual float* Backward(const BackwardPass& pass) = 0;

  // The Keras layer entry this layer reads back from (Keras 3 form): module, class_name,
  // config (name, trainable, dtype and every argument resolved) and build_config.
  nlohmann::json ToKeras() const;

 protected:
  explicit Layer(std::string class_name) : class_name_(std::move(class_name)) {}

  // Build's layer-specific part: check `input` and return the output shape; declare
  // variables with DeclareVariable. Error messages need not name the layer.
  virtual absl::StatusOr<Shape> BuildShapes(const Shape& input) = 0;
  void DeclareVariable(LayerVariable variable) { variables_.push_back(std::move(variable)); }

  // The layer's own Keras config keys (base keys are added by ToKeras).
  virtual nlohmann::json KerasConfig() const = 0;

  // Rows and columns of a [batch, ..., last] tensor seen as a matrix of last-axis rows.
  int64_t RowsOf(const Shape& shape, int64_t batch) const;

 private:
  std::string class_name_;
  std::string name_;
  Shape declared_input_shape_;
  Shape input_shape_;
  Shape output_shape_;
  std::vector<LayerVariable> variables_;
};

// Reads the keys every Keras layer shares (after the layer read its own, so that a layer
// may give a shared key its own meaning, as Embedding does input_dim): name (returned, may be empty), trainable
// (only true), dtype (only float32: a string or a DTypePolicy dict), autocast,
// activity_regularizer (only null), weights (only null), batch_size, and the input-shape
// declarations (set on `layer`). Errors: INVALID_ARGUMENT naming the key.
absl::StatusOr<std::string> ReadCommonKeys(LayerConfig& config, Layer* layer);

// Reads the keys of `batched` (lists that start with the batch dimension) and then, if
// none was set, of `unbatched`, into layer->declared_input_shape(); a later key wins.
// Errors: INVALID_ARGUMENT for a malformed or unknown-size shape.
absl::Status ReadInputShapeKeys(LayerConfig& config, std::initializer_list<const char*> batched,
                                std::initializer_list<const char*> unbatched, Layer* layer);

// Reads a Keras shape list; `has_batch`: the first entry is the batch dimension (null).
// Every other entry must be a positive integer. Errors: INVALID_ARGUMENT.
absl::StatusOr<Shape> ParseKerasShape(const nlohmann::json& value, bool has_batch);

// [null, dims...] as Keras writes a batch shape.
nlohmann::json BatchShapeJson(const Shape& shape);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_LAYER_H_
