#ifndef PSTRAIN_COMMON_MODEL_MODEL_H_
#define PSTRAIN_COMMON_MODEL_MODEL_H_

// A Keras-compatible Sequential model: reads what Keras's model.to_json() writes, names its
// variables like Keras ("dense/kernel"), initializes them with Keras's initializers, and
// computes the loss, accuracy and gradients of the mean loss on a Backend.
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
#include "common/model/loss.h"
#include "common/tensor.h"
#include "nlohmann/json.hpp"

namespace pstrain {

struct VariableSpec {
  std::string name;             // "dense/kernel", "dense/bias", "dense_1/kernel", ...
  std::vector<int64_t> shape;   // kernel [in, out], bias [out]
};

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
  // Builds the model from a Keras Sequential to_json() object (Keras 2 or Keras 3).
  // Layers: InputLayer, Dense, Dropout, Activation, Flatten. Activations: linear, relu,
  // sigmoid, tanh, softmax. `backend` may be null to only validate a model description
  // (TrainStep/Evaluate then fail with FAILED_PRECONDITION).
  // Errors: INVALID_ARGUMENT naming the layer and field for: not a Sequential model, an
  // unsupported layer, activation or initializer, a field that changes the math
  // (regularizers, constraints, noise_shape, trainable=false, ...), an unknown input size,
  // Dense on a rank>1 input without Flatten, duplicate layer names.
  static absl::StatusOr<std::unique_ptr<Model>> FromKerasJson(const nlohmann::json& keras_model,
                                                              Backend* backend /* Not owned. */);
  // As FromKerasJson; INVALID_ARGUMENT also for malformed JSON text.
  static absl::StatusOr<std::unique_ptr<Model>> FromKerasJsonText(const std::string& text,
                                                                  Backend* backend /* Not owned. */);

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Sets the loss (required before TrainStep/Evaluate) and resolves "accuracy" as Keras
  // does: binary when output_size() == 1, sparse categorical for sparse CE, else
  // categorical. With from_logits=false and a final softmax (sigmoid) layer, CE (BCE) is
  // computed from the logits by the fused, numerically stable path, as Keras does.
  // Never fails today; returns Status so future losses can reject a model.
  absl::Status SetLoss(const LossConfig& loss);
  AccuracyMetric accuracy_metric() const { return accuracy_; }

  const std::string& name() const { return name_; }
  // In Keras's order (layer by layer, kernel before bias).
  const std::vector<VariableSpec>& trainable_variables() const { return variables_; }
  // One tensor per trainable variable, drawn with the layer's initializer. An initializer's
  // own seed wins over `seed`; otherwise each variable gets a stream derived from `seed`
  // and its index. Deterministic for a given seed.
  std::vector<Tensor> InitialValues(uint64_t seed) const;

  // Input shape without the batch dimension, and its element count.
  const std::vector<int64_t>& input_shape() const { return input_shape_; }
  int64_t input_size() const { return input_size_; }
  int64_t output_size() const { return output_size_; }

  // Forward with dropout active, then backward. `gradients` receives the gradients of the
  // MEAN loss over the batch, in trainable_variables() order and shapes (tensors already
  // there with the right shapes are reused). x: [B, input_size] or [B, input_shape...];
  // y: [B] (or [B,1]) class ids as float for sparse CE, else [B, output_size] (or [B] when
  // output_size is 1). Dropout masks are drawn from `dropout_seed`.
  // Errors: INVALID_ARGUMENT for a wrong number of weights or any shape mismatch (shapes in
  // the message) or a label that is not an integer in [0, output_size);
  // FAILED_PRECONDITION no loss set or no backend; backend errors as returned.
  absl::StatusOr<StepResult> TrainStep(absl::Span<const Tensor> weights, const Tensor& x,
                                       const Tensor& y, uint64_t dropout_seed,
                                       std::vector<Tensor>* gradients);

  // Forward only, dropout off. Errors: as TrainStep.
  absl::StatusOr<StepResult> Evaluate(absl::Span<const Tensor> weights, const Tensor& x,
                                      const Tensor& y);

  // Model outputs (after the final activation), dropout off: [B, output_size].
  // Errors: as TrainStep, without the y checks.
  absl::StatusOr<Tensor> Predict(absl::Span<const Tensor> weights, const Tensor& x);

  struct Layer;       // defined in model.cc
  struct Buffers;     // defined in model.cc

 private:
  Model();

  absl::Status CheckWeightsAndX(absl::Span<const Tensor> weights, const Tensor& x) const;
  absl::Status CheckY(const Tensor& y, int64_t batch) const;
  absl::Status PrepareBuffers(int64_t batch);
  // Runs the forward pass; returns the pointer (backend memory) to the last layer's
  // output, which is logits when the loss is fused.
  absl::StatusOr<const float*> Forward(absl::Span<const Tensor> weights, const Tensor& x,
                                       bool training, uint64_t dropout_seed, bool fused);
  absl::StatusOr<StepResult> Run(absl::Span<const Tensor> weights, const Tensor& x,
                                 const Tensor& y, bool training, uint64_t dropout_seed,
                                 std::vector<Tensor>* gradients);

  Backend* backend_ = nullptr;  // Not owned.
  std::string name_;
  std::vector<Layer> layers_;
  std::vector<VariableSpec> variables_;
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
