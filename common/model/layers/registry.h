#ifndef PSTRAIN_COMMON_MODEL_LAYERS_REGISTRY_H_
#define PSTRAIN_COMMON_MODEL_LAYERS_REGISTRY_H_

// Layer classes by Keras class_name. The model builds each to_json() layer entry through
// the registry, so it knows no layer by name; a program can register a layer of its own
// (before it builds a model that uses it).
//
// Thread-safe.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/model/layers/layer.h"
#include "common/model/layers/layer_config.h"

namespace pstrain {

class LayerRegistry {
 public:
  // Reads the layer's own config keys (LayerConfig marks what it reads) and returns the
  // layer, not yet built. Errors: INVALID_ARGUMENT through config.Error().
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Layer>>(LayerConfig& config)>;

  struct Entry {
    std::string class_name;    // "Conv2D"
    std::string default_name;  // "conv2d": Keras's automatic name, then conv2d_1, ...
    // False for a layer whose config has none of the keys all layers share (InputLayer).
    bool common_keys = true;
    Factory factory;
  };

  LayerRegistry() = default;

  // Errors: ALREADY_EXISTS for a class name registered before; INVALID_ARGUMENT for an
  // empty class or default name or a null factory.
  absl::Status Register(Entry entry);

  // Creates a layer from a to_json() layer's class name and config: the factory, then
  // the common keys, then a check that no key is left unread. The name is the config's
  // (empty when it has none: the model then picks Keras's automatic one).
  // Errors: INVALID_ARGUMENT for an unregistered class (listing the known ones), or the
  // layer's config errors (naming the key).
  absl::StatusOr<std::unique_ptr<Layer>> Create(const std::string& class_name,
                                                LayerConfig& config) const;

  // Keras's automatic name base for a registered class ("" when unknown).
  std::string DefaultName(const std::string& class_name) const;

  std::vector<std::string> ClassNames() const;

  // The process-wide registry, holding every layer of this folder.
  static LayerRegistry& Default();

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_LAYERS_REGISTRY_H_
