#ifndef PSTRAIN_COMMON_MODEL_LOSS_H_
#define PSTRAIN_COMMON_MODEL_LOSS_H_

// The loss a model is compiled with, in Keras's terms, and its reader from Keras's
// compile(loss=...) values.

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

struct LossConfig {
  enum class Kind {
    kSparseCategoricalCrossentropy,  // y: [B] class ids as float (or [B,1])
    kCategoricalCrossentropy,        // y: [B,K] distributions (one-hot)
    kMeanSquaredError,               // y: [B,K]
    kBinaryCrossentropy,             // y: [B,K] in [0,1]
  };
  Kind kind = Kind::kSparseCategoricalCrossentropy;
  // True: the model outputs logits. False: probabilities (Keras's default).
  bool from_logits = false;

  bool operator==(const LossConfig& o) const {
    return kind == o.kind && from_logits == o.from_logits;
  }
};

// Keras's snake_case name ("sparse_categorical_crossentropy", ...).
std::string LossName(LossConfig::Kind kind);

// Keras names compared the way Keras accepts them: "SparseCategoricalCrossentropy" and
// "sparse_categorical_crossentropy" both give "sparsecategoricalcrossentropy".
std::string CanonicalKerasName(const std::string& name);

// Reads a Keras loss: a string ("sparse_categorical_crossentropy", "categorical_crossentropy",
// "mse"/"mean_squared_error", "binary_crossentropy", also the CamelCase class names) or a
// config dict {"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": true,
// ...}} (Keras 3's "module"/"registered_name" accepted).
// Errors: INVALID_ARGUMENT for an unknown loss, a non-bool from_logits, or a field that
// changes the math and is not supported (label_smoothing != 0, ignore_class, a reduction
// other than the mean over the batch), each named in the message.
absl::StatusOr<LossConfig> LossConfigFromKeras(const nlohmann::json& value);

// The Keras config dict for `config`; LossConfigFromKeras reads it back to an equal value.
nlohmann::json LossConfigToKeras(const LossConfig& config);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LOSS_H_
