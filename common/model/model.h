#ifndef PSTRAIN_COMMON_MODEL_MODEL_H_
#define PSTRAIN_COMMON_MODEL_MODEL_H_

// A Keras-compatible Sequential model: reads what Keras's model.to_json() writes (Keras 2
// or 3), builds each layer through the LayerRegistry (common/model/layers/), names its
// variables like Keras ("dense/kernel"), initializes them with Keras's initializers, and
// computes the loss, accuracy and gradients of the mean loss on a Backend. It knows no
// layer by name: it runs a stack of Layer objects forward and backward.
//
// The model holds no variable values: weights are passed to every call (a worker pulls them
// from the parameter servers), so one Model serves any number of weight versions.
//
// Thread-safety: not thread-safe (it reuses its activation buffers); use one per thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/math/backend.h"
#include "common/model/layers/layer.h"
#include "common/model/layers/registry.h"
#include "common/model/loss.h"
#include "common/model/row_initializer.h"
#include "common/model/variable_spec.h"
#include "common/tensor.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

// Totals over one batch; sum across batches and divide by `samples` for Keras's numbers.
struct StepResult {
  double loss_sum = 0.0;  // sum over samples of the per-sample loss
  int64_t correct = 0;    // samples the accuracy metric counts as correct
  int64_t samples = 0;
};

// How "accuracy" is resolved (Keras's rule, from the output and target shapes).
enum class AccuracyMetric { kSparseCategorical, kCategorical, kBinary };

class Model {
 public:
  // Builds the model from a Keras Sequential to_json() object (Keras 2 or Keras 3), each
  // layer through `registry` (LayerRegistry::Default() by default; README lists the
  // layers and keys). `backend` may be null to only validate a model description
  // (TrainStep/Evaluate then fail with FAILED_PRECONDITION).
  // Errors: INVALID_ARGUMENT naming the layer (index, name, class) and the key for: not a
  // Sequential model, an unsupported layer, a config key Keras does not define for that
  // layer, a supported key of the wrong type or out of range, a key pstrain does not
  // implement set to other than its default (regularizers, constraints, noise_shape,
  // trainable=false, ...), an unknown input size, an input a layer cannot take (shapes
  // in the message), a layer without input gradient after another, duplicate names.
  static absl::StatusOr<std::unique_ptr<Model>> FromKerasJson(
      const nlohmann::json& keras_model, Backend* backend /* Not owned. */,
      const LayerRegistry& registry = LayerRegistry::Default());
  // As FromKerasJson; INVALID_ARGUMENT also for malformed JSON text.
  static absl::StatusOr<std::unique_ptr<Model>> FromKerasJsonText(
      const std::string& text, Backend* backend /* Not owned. */,
      const LayerRegistry& registry = LayerRegistry::Default());

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Sets the loss (required before TrainStep/Evaluate) and resolves "accuracy" as Keras
  // does: binary when output_size() == 1, sparse categorical for sparse CE, else
  // categorical. With from_logits=false and a final softmax (sigmoid) activation, CE (BCE)
  // is computed from the logits by the fused, numerically stable path, as Keras does.
  // Errors: INVALID_ARGUMENT a categorical cross-entropy on an output of rank > 1 (Keras
  // would take it per position; pstrain's losses take one row per sample: add Flatten or
  // a global pooling layer).
  absl::Status SetLoss(const LossConfig& loss);
  AccuracyMetric accuracy_metric() const { return accuracy_; }

  const std::string& name() const { return name_; }
  // The backend the passes run on (null: a description only), and the loss SetLoss set
  // (a copy of the model, e.g. ps_server/client/sparse_embedding.h's compact one, takes them).
  Backend* backend() const { return backend_; }
  const LossConfig& loss() const { return loss_; }

  // Every variable, in Keras's order (layer by layer; within a layer as it declares them:
  // kernel before bias, gamma, beta, moving_mean, moving_variance). This is what the
  // weights and gradients of every call below hold, what the ps stores and what
  // checkpoints keep.
  const std::vector<VariableSpec>& variables() const { return variables_; }
  // The trainable ones only (Keras's model.trainable_variables), in the same order.
  const std::vector<VariableSpec>& trainable_variables() const { return trainable_; }
  // One tensor per variable, drawn with the layer's initializer row by row
  // (InitialValuesOf). An initializer's own seed wins over `seed`; otherwise each variable
  // draws from a stream of (`seed`, its name). Deterministic for a given seed.
  std::vector<Tensor> InitialValues(uint64_t seed) const;
  // How variable `v` (an index into variables()) is drawn for job seed `seed`: what
  // InitialValues draws for it, and what a ps sent this draws for its rows of it (each
  // row on its own, so the values do not depend on how the variable is split).
  RowInitializer InitialValuesOf(size_t v, uint64_t seed) const;

  // Input shape without the batch dimension, and its element count.
  const std::vector<int64_t>& input_shape() const { return input_shape_; }
  int64_t input_size() const { return input_size_; }
  const std::vector<int64_t>& output_shape() const { return layers_.back()->output_shape(); }
  int64_t output_size() const { return output_size_; }

  // The layers that run, in order (the InputLayer is not one of them).
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }

  // The model as Keras 3's model.to_json() writes it (an InputLayer, then every layer
  // with its config resolved and its build_config); FromKerasJson reads it back to the
  // same model (same variables, same outputs for the same weights).
  nlohmann::json ToKerasJson() const;

  // Forward with dropout active and batch statistics, then backward. `gradients` receives,
  // in variables() order and shapes (tensors already there with the right shapes are
  // reused), the gradients of the MEAN loss over the batch for trainable variables and
  // the observations for non-trainable ones (see VariableSpec). `weights`: every
  // variable. x: [B, input_size] or [B, input_shape...]; y: [B] (or [B,1]) class ids as
  // float for sparse CE, else [B, output_size] (or [B] when output_size is 1). Dropout
  // masks are drawn from `dropout_seed`.
  // Errors: INVALID_ARGUMENT for a wrong number of weights or any shape mismatch (shapes in
  // the message), a label that is not an integer in [0, output_size), an input the first
  // layer rejects (an Embedding id out of range); FAILED_PRECONDITION no loss set or no
  // backend; backend errors as returned.
  absl::StatusOr<StepResult> TrainStep(absl::Span<const Tensor> weights, const Tensor& x,
                                       const Tensor& y, uint64_t dropout_seed,
                                       std::vector<Tensor>* gradients);

  // Forward only, at inference (dropout off, moving statistics). Errors: as TrainStep.
  absl::StatusOr<StepResult> Evaluate(absl::Span<const Tensor> weights, const Tensor& x,
                                      const Tensor& y);

  // Model outputs (after the final activation) at inference: [B, output_shape...].
  // Errors: as TrainStep, without the y checks.
  absl::StatusOr<Tensor> Predict(absl::Span<const Tensor> weights, const Tensor& x);

  struct Buffers;  // defined in model.cc

 private:
  Model();

  // FromKerasJson's steps.
  absl::Status AddLayers(const nlohmann::json& layers, std::vector<int64_t> declared_shape,
                         const LayerRegistry& registry);
  absl::Status AddLayer(std::unique_ptr<Layer> layer, const std::string& what);

  absl::Status CheckWeightsAndX(absl::Span<const Tensor> weights, const Tensor& x) const;
  absl::Status CheckY(const Tensor& y, int64_t batch) const;
  absl::Status PrepareBuffers(int64_t batch);
  // Points the buffers at x and the weights (copying them to a device backend).
  absl::Status LoadInputs(absl::Span<const Tensor> weights, const Tensor& x);
  // Runs the forward pass; returns the pointer (backend memory) to the last layer's
  // output, which is logits when the loss is fused.
  const float* Forward(bool training, uint64_t dropout_seed, bool fused);
  // Runs the backward pass from the loss gradient into the gradient buffers.
  void Backward();
  absl::StatusOr<StepResult> Run(absl::Span<const Tensor> weights, const Tensor& x,
                                 const Tensor& y, bool training, uint64_t dropout_seed,
                                 std::vector<Tensor>* gradients);

  Backend* backend_ = nullptr;  // Not owned.
  std::string name_;
  std::string input_name_;  // the InputLayer's, when the JSON had one
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int> first_variable_;  // per layer: index of its first variable
  std::vector<VariableSpec> variables_;
  std::vector<VariableSpec> trainable_;
  std::vector<Initializer> initializers_;  // per variable
  // The first layer with variables: the backward pass stops there.
  size_t first_param_ = 0;
  std::vector<int64_t> input_shape_;
  int64_t input_size_ = 0;
  int64_t output_size_ = 0;
  bool has_loss_ = false;
  LossConfig loss_;
  LossKind loss_kind_ = LossKind::kSoftmaxSparseCrossEntropy;
  bool fused_ = false;  // the last layer's softmax/sigmoid is folded into the loss
  AccuracyMetric accuracy_ = AccuracyMetric::kSparseCategorical;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_MODEL_H_
