#ifndef PSTRAIN_COMMON_MODEL_LAYERS_LAYER_CONFIG_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_LAYER_CONFIG_H_

// Reading one layer's Keras config (the "config" object of a to_json() layer entry).
//
// Every getter remembers the key it read; CheckAllRead() then reports the first key no
// one read as unknown to that layer, so a typo ("activaton" in a Dense) is an error that
// names the layer and the key, as Keras raises for an unknown argument. Keys Keras defines
// but pstrain does not implement are read with Unsupported(): accepted at their default
// value (how Keras's own to_json() writes them), an error naming the key otherwise.
//
// Errors from every method are INVALID_ARGUMENT and start with the layer's description
// ("layer 2 'conv2d' (Conv2D): ").

#include <cstdint>
#include <optional>
#include <utility>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/math/backend.h"
#include "common/model/layers/initializer.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

class LayerConfig {
 public:
  // `config` must outlive this reader. `what` describes the layer for messages.
  LayerConfig(const nlohmann::json* config, std::string what)
      : config_(config), what_(std::move(what)) {}

  const std::string& what() const { return what_; }
  void set_what(std::string what) { what_ = std::move(what); }

  // INVALID_ARGUMENT "<what>: <message>".
  absl::Status Error(absl::string_view message) const;

  // True when the key is present and not null (does not mark it read).
  bool Has(const char* key) const;
  // True when a getter already read `key` (a layer that gives a shared key its own
  // meaning, as Embedding's input_dim, reads it first).
  bool WasRead(const char* key) const { return read_.count(key) > 0; }

  // Typed getters: a missing or null key gives `def`; a value of another type is an error
  // naming the key.
  absl::StatusOr<int64_t> Int(const char* key, int64_t def);
  absl::StatusOr<double> Number(const char* key, double def);
  absl::StatusOr<bool> Bool(const char* key, bool def);
  absl::StatusOr<std::string> String(const char* key, const std::string& def);
  // A required positive integer ("units must be a positive integer").
  absl::StatusOr<int64_t> PositiveInt(const char* key);
  // An int or a list of `n` ints (Keras's kernel_size=3 or (3, 3)), each >= `min`.
  // Missing: `def` if given, else an error.
  absl::StatusOr<std::vector<int64_t>> IntTuple(const char* key, size_t n, int64_t min,
                                                std::optional<std::vector<int64_t>> def);
  // An activation name, Keras 3's {"class_name": "function", "config": "relu"} wrapper, or
  // null (linear). Supported: linear, relu, sigmoid, tanh, softmax.
  absl::StatusOr<Activation> ActivationValue(const char* key);
  // An initializer; missing or null: Keras's default `def` ("glorot_uniform").
  absl::StatusOr<Initializer> InitializerValue(const char* key, const char* def);
  // "valid" or "same" (case-insensitive, as Keras accepts); missing: "valid".
  absl::StatusOr<std::string> Padding(const char* key);
  // data_format: only channels_last (null means Keras's default image_data_format,
  // channels_last) is supported.
  absl::Status ChannelsLast();

  // The raw value (null when missing), marked read.
  const nlohmann::json& Raw(const char* key);

  // A key Keras defines for this layer whose feature pstrain lacks: OK when missing, null,
  // or equal to `default_value`; otherwise "<key> is unsupported (got <value>)".
  absl::Status Unsupported(const char* key, const nlohmann::json& default_value);
  // The same with `default_value` null (an overload, not a default argument, so that this
  // header needs only json_fwd.hpp).
  absl::Status Unsupported(const char* key);

  // Error for the first key that no getter read: "unknown config key \"<key>\"".
  absl::Status CheckAllRead() const;

 private:
  const nlohmann::json* Find(const char* key);

  const nlohmann::json* config_;  // Not owned.
  std::string what_;
  std::set<std::string> read_;
};

// Keras's activation name for `a` ("linear", "relu", ...).
const char* ActivationName(Activation a);

// Keras 3's serialized float32 dtype policy, as every layer config carries it.
nlohmann::json Float32Policy();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_LAYER_CONFIG_H_
