#ifndef PSTRAIN_COMMON_MODEL_LAYERS_INITIALIZER_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_INITIALIZER_H_

// Keras's weight initializers: read from a layer config, resolved for a variable into a
// RowInitializer (common/model/row_initializer.h: drawn row by row, the same however the
// variable is split), and written back as Keras 3 config dicts.
//
// Supported: Zeros, Ones, Constant, RandomNormal, RandomUniform, TruncatedNormal,
// VarianceScaling and its named forms (GlorotUniform/Normal, HeUniform/Normal,
// LecunUniform/Normal), under Keras 2 and Keras 3 spellings ("glorot_uniform",
// "GlorotUniform", "uniform", {"class_name": ..., "config": {...}}).

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/row_initializer.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

class Initializer {
 public:
  // Zeros.
  Initializer() = default;

  // Reads a Keras initializer value (a name or a config dict, Keras 3's "module" and
  // "registered_name" accepted). Errors: INVALID_ARGUMENT for an unknown initializer,
  // an unknown or mistyped config key, or an out-of-range parameter (one that would draw
  // values beyond the floats among them); the message starts
  // with what is wrong, for the caller to prefix with the layer and field.
  static absl::StatusOr<Initializer> FromKeras(const nlohmann::json& value);

  // How a variable of `shape` is drawn: the distribution with its parameters worked out
  // for the shape (fans follow Keras: rank 1 uses the length for both, rank >= 2 the last
  // two axes times the product of the others, a receptive field as for convolution
  // kernels) and the seed: the initializer's own seed when it has one (so, as in Keras,
  // variables of one shape with one seeded initializer start equal), else
  // `variable_seed` (VariableSeed of the job seed and the variable's name).
  RowInitializer ForVariable(const std::vector<int64_t>& shape, uint64_t variable_seed) const;

  // The Keras 3 config dict ({"module": "keras.initializers", "class_name": ...,
  // "config": {...}, "registered_name": null}); FromKeras reads it back to an equal one.
  nlohmann::json ToKeras() const;

  bool operator==(const Initializer& o) const;

 private:
  enum class Kind { kConstant, kNormal, kTruncatedNormal, kUniform, kVarianceScaling };
  enum class Mode { kFanIn, kFanOut, kFanAvg };
  enum class Dist { kTruncatedNormal, kUntruncatedNormal, kUniform };

  // FromKeras's steps, in order: the config's "seed"; the class (its parameters, and in
  // `*keys` the config keys it takes); then no other key, and parameters in range.
  absl::Status ReadSeed(const nlohmann::json& config);
  absl::Status ReadClass(const std::string& class_name, const nlohmann::json& config,
                         std::set<std::string>* keys);
  absl::Status ReadVarianceScaling(const nlohmann::json& config);
  void SetVarianceScaling(const char* name, double scale, Mode mode, Dist dist);
  absl::Status CheckConfig(const nlohmann::json& config, const std::set<std::string>& keys) const;

  std::string class_name_ = "Zeros";  // Keras 3 class name, for ToKeras
  Kind kind_ = Kind::kConstant;
  double a_ = 0.0;  // constant value | mean | minval
  double b_ = 0.0;  // stddev | maxval
  double scale_ = 1.0;
  Mode mode_ = Mode::kFanAvg;
  Dist dist_ = Dist::kUniform;
  bool has_seed_ = false;
  uint64_t seed_ = 0;
};

// Keras's string form of a layer's default initializer, e.g. Initializer::FromKeras
// ("glorot_uniform"); for defaults known to be valid (never fails).
Initializer DefaultInitializer(const std::string& name);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_INITIALIZER_H_
