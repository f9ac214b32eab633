#ifndef PSTRAIN_COMMON_MODEL_MODEL_MEMORY_H_
#define PSTRAIN_COMMON_MODEL_MODEL_MEMORY_H_

// What a model costs in memory before any of it is allocated, computed from what every
// layer declares (its variables' shapes, its input and output shapes), so it needs no
// knowledge of layer types: a Dense(300000000) is refused at start with a message naming
// it, instead of std::bad_alloc once every task has registered.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/model/model.h"

namespace pstrain {

// What one process keeps of the model.
struct ModelMemoryUse {
  // Float arrays held per variable element: its value, its gradient(s), the optimizer's
  // slots, copies on the wire...
  int64_t copies_per_variable = 1;
  // Examples whose activations are held at once (a batch; 0: none), per replica.
  int64_t batch = 0;
  int64_t replicas = 1;
  // Says what the copies are, for the message ("value, gradient and 2 optimizer slots").
  std::string copies_are;
  // >= 0: the first layer is an Embedding read by rows (a ps worker's training, the chief's
  // evaluation: ps_server/client/sparse_embedding.h): of its table this process holds only
  // this many rows (a batch's ids), each copies_per_variable times, not the whole table.
  int64_t first_layer_rows_held = -1;
};

// Bytes `use` of `model` needs (saturating at INT64_MAX): per layer, its variables'
// elements times copies_per_variable, and for each of `replicas` models its output
// (kept for the backward pass), the gradient of its output and of its input, per example
// of `batch`; 4 bytes each.
int64_t ModelMemoryBytes(const Model& model, const ModelMemoryUse& use);

// OK when ModelMemoryBytes fits the memory budget (common/memory_budget.h).
// Errors: RESOURCE_EXHAUSTED "<who>: model <name> needs <N> (...), more than the memory
// budget of <M> (--max_memory); its largest layer, <layer> (<class>), needs <K>: <its
// variables' shapes>".
absl::Status CheckModelMemory(const Model& model, const ModelMemoryUse& use,
                              absl::string_view who);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_MODEL_MEMORY_H_
