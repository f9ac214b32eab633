#ifndef PSTRAIN_COMMON_MODEL_OPTIMIZER_H_
#define PSTRAIN_COMMON_MODEL_OPTIMIZER_H_

// Server-side optimizers with Keras's names, parameters, defaults and update formulas
// (Keras 3 / tf.keras >= 2.11): SGD, Adam, Adagrad, RMSprop.
//
// OptimizerConfig (proto/ps.proto) is proto3 and has no field presence, so a field equal to
// 0 means "Keras's default" for learning_rate, beta_1, beta_2, epsilon, rho and
// initial_accumulator_value. momentum's default is 0 anyway, so 0 means no momentum.
// (Consequence: an explicit 0 for e.g. epsilon cannot be expressed; Keras users never
// want one.) OptimizerConfigFromKeras returns configs with every field resolved.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/model/variable_spec.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/ps.pb.h"

namespace pstrain {

// The kind an optimizer name means: case-insensitive "sgd", "adam", "adagrad", "rmsprop"
// (Keras's class names "SGD", "Adam", "Adagrad", "RMSprop" among them).
// Errors: INVALID_ARGUMENT an unknown name, the supported ones listed.
absl::StatusOr<OptimizerKind> OptimizerKindFromName(absl::string_view name);

// "sgd", "adam", "adagrad", "rmsprop"; "" for OPTIMIZER_KIND_UNSPECIFIED or a value this
// build does not know.
absl::string_view OptimizerKindName(OptimizerKind kind);

// Per-variable optimizer state: the number of updates applied and named slot vectors
// (Keras 3's names: "momentum", "velocity", "accumulator"), each as long as the variable.
// Not thread-safe: guarded by the variable's lock, like the variable itself.
class OptimizerState {
 public:
  explicit OptimizerState(int64_t num_elements) : num_elements_(num_elements) {}

  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t n) { iterations_ = n; }  // for checkpoint restore
  int64_t num_elements() const { return num_elements_; }

  // Adds a slot filled with `initial_value`; returns it. Called by optimizers.
  std::vector<float>* AddSlot(const std::string& name, float initial_value);
  // The slot named `name`, or null.
  std::vector<float>* slot(const std::string& name);
  const std::vector<float>* slot(const std::string& name) const;
  // Every slot, in creation order, for checkpointing (write and restore in place).
  std::vector<std::pair<std::string, std::vector<float>*>> slots();

 private:
  friend class Optimizer;
  int64_t num_elements_;
  int64_t iterations_ = 0;
  std::vector<std::pair<std::string, std::vector<float>>> slots_;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The kind is config.kind, or when that is unset (a client from before the field)
  // OptimizerKindFromName(config.name).
  // Errors: INVALID_ARGUMENT for an unknown name (case-insensitive "sgd", "adam", "adagrad",
  // "rmsprop"), a kind this build does not know (its number named: a newer client), a
  // name and a kind that disagree, or an out-of-range parameter (negative learning rate,
  // beta outside [0,1), momentum outside [0,1], ...), named in the message.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerConfig& config);

  // "sgd", "adam", "adagrad", "rmsprop".
  virtual std::string name() const = 0;
  // The config with defaults resolved (no zeros standing for defaults), kind and name
  // both set.
  virtual const OptimizerConfig& config() const = 0;

  virtual std::unique_ptr<OptimizerState> NewState(int64_t num_elements) const = 0;

  // variable -= update(gradient, state); increments state->iterations(). The caller
  // guarantees gradient.size() == variable.size() == state->num_elements() and holds the
  // variable's lock. Never fails.
  virtual void Apply(absl::Span<const float> gradient, absl::Span<float> variable,
                     OptimizerState* state) const = 0;

  // Whether Apply(gradient, variable, state) would leave the variable and every slot
  // finite: a finite gradient can still overflow a float (Adam's velocity squares it,
  // SGD multiplies it by the learning rate), and a non-finite slot is never repaired by
  // later updates. Changes nothing; same preconditions as Apply. This default runs Apply
  // on copies; the built-in optimizers run their update's arithmetic without storing it.
  virtual bool UpdateStaysFinite(absl::Span<const float> gradient,
                                 absl::Span<const float> variable,
                                 const OptimizerState& state) const;

  // Apply's update computed out of place: reads `variable` and `state`, writes the updated
  // values to `out_variable` and the updated slots and count to `out_state`, and returns
  // whether every value and slot it wrote is finite (as UpdateStaysFinite). Changes
  // neither `variable` nor `state`. `out_state` is a state of this optimizer for as many
  // elements (NewState's; what it held is overwritten) and `out_variable` as long as
  // `variable`; neither overlaps the inputs. A caller that swaps the results in when they
  // are finite (the ps, whose pushes change nothing unless every update stays finite)
  // checks and applies an update in the one pass of Apply, where UpdateStaysFinite
  // followed by Apply costs two. This default copies the inputs and runs Apply on the
  // copies; the built-in optimizers run their update's kernel once.
  virtual bool ApplyInto(absl::Span<const float> gradient, absl::Span<const float> variable,
                         const OptimizerState& state, absl::Span<float> out_variable,
                         OptimizerState* out_state) const;

  // A row-sparse update (TensorFlow's ResourceSparseApply* ops): `variable` is a table of
  // rows of `row_gradients.size() / rows.size()` elements; row rows[i] gets
  // row_gradients' i-th row, and only the rows listed are touched, values and slots alike.
  // Each listed row is updated exactly as Apply updates its elements, with the learning
  // rate and Adam's bias correction of this variable's update count (state->iterations(),
  // incremented once). So SGD without momentum and Adagrad give the same weights as a
  // dense Apply of the gradient with zeros in the other rows; Adam, RMSprop and momentum
  // are "lazy" (as tf.keras's LazyAdam and TF's sparse momentum): a row's moments decay
  // only when the row is pushed, where the dense update decays every row every step.
  // The caller guarantees rows are distinct and in range, row_gradients.size() ==
  // rows.size() * row width, and holds the variable's lock. Never fails.
  virtual void ApplyRows(absl::Span<const int64_t> rows, absl::Span<const float> row_gradients,
                         absl::Span<float> variable, OptimizerState* state) const = 0;

  // Whether ApplyRows(rows, row_gradients, variable, state) would leave the rows it
  // touches, and their slots, finite (as UpdateStaysFinite for Apply). Changes nothing;
  // same preconditions as ApplyRows. This default runs ApplyRows on copies of the rows;
  // the built-in optimizers run their update's arithmetic without storing it.
  virtual bool RowUpdatesStayFinite(absl::Span<const int64_t> rows,
                                    absl::Span<const float> row_gradients,
                                    absl::Span<const float> variable,
                                    const OptimizerState& state) const;
};

// The update each variable gets under one OptimizerConfig: the optimizer, or for a variable
// listed in config.moving_averages (or one of its shards, "<variable>/part_<i>") a moving
// average, an Optimizer whose Apply folds the pushed observation into the value
// (value = momentum * value + (1 - momentum) * observation; no slots; iterations count the
// updates). Immutable after Create: safe to share between threads.
class UpdateRules {
 public:
  // Errors: Optimizer::Create's; INVALID_ARGUMENT for a moving-average entry with an empty
  // or repeated variable name or a momentum outside [0, 1].
  static absl::StatusOr<std::unique_ptr<UpdateRules>> Create(const OptimizerConfig& config);

  // The update of `variable` (a model variable or a shard name).
  const Optimizer& For(const std::string& variable) const;
  const Optimizer& optimizer() const { return *optimizer_; }

 private:
  UpdateRules() = default;

  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::pair<std::string, std::unique_ptr<Optimizer>>> moving_averages_;
};

// Adds a moving-average entry to `config` for every non-trainable variable of a model
// (VariableSpec::trainable false), with its momentum; trainable ones keep the optimizer.
void AddMovingAverageRules(const std::vector<VariableSpec>& variables, OptimizerConfig* config);

// Reads Keras's compile(optimizer=...) value: a string ("adam", "sgd", "SGD", "rmsprop",
// "adagrad") or a config dict {"class_name": "Adam", "config": {"learning_rate": 0.01, ...}}
// (Keras 3's "module"/"registered_name" accepted). Every field of the result is resolved,
// its kind among them (and its name, for a ps from before OptimizerConfig.kind).
// learning_rate may be a number or an ExponentialDecay schedule dict
// ({"class_name": "ExponentialDecay", "config": {"initial_learning_rate", "decay_steps",
// "decay_rate", "staircase"}}).
// Errors: INVALID_ARGUMENT for an unknown optimizer, a non-number (or non-bool) field,
// another schedule, or a field we do not implement that changes the update
// (amsgrad, centered, weight_decay, clipnorm, clipvalue, global_clipnorm, use_ema, decay).
absl::StatusOr<OptimizerConfig> OptimizerConfigFromKeras(const nlohmann::json& value);

// The learning rate after `iterations` applied updates: the constant rate, or Keras's
// ExponentialDecay schedule when config.lr_schedule() is "exponential_decay".
float LearningRateAt(const OptimizerConfig& config, int64_t iterations);

// Keras config dict for `config` (defaults resolved); OptimizerConfigFromKeras reads it
// back to an equal config.
nlohmann::json OptimizerConfigToKeras(const OptimizerConfig& config);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_OPTIMIZER_H_
