#ifndef PSTRAIN_WORKER_PS_TRAINER_H_
#define PSTRAIN_WORKER_PS_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model.h"
#include "common/tensor.h"
#include "proto/chief.pb.h"
#include "ps_server/ps_client.h"

namespace pstrain {

// One worker's side of parameter-server training: computes gradients on a batch with the
// weights it last pulled, and pushes them to the ps tasks that own each variable, getting
// the updated weights back in the same round trip (PushPull), one RPC per ps, all in
// flight at once. Asynchronous: other workers push in between, as in TensorFlow's
// ParameterServerStrategy. Not thread-safe: one trainer per worker thread.
class PsTrainer {
 public:
  // `model` and the clients are not owned. `placement` names, for every trainable
  // variable of the model, the index into `ps` of the task that owns it.
  // Errors: INVALID_ARGUMENT a variable is missing from the placement, has another shape,
  //         or is placed on a ps index out of range.
  static absl::StatusOr<std::unique_ptr<PsTrainer>> Create(
      Model* model, std::vector<PsClient*> ps,
      const std::vector<VariablePlacementEntry>& placement, uint64_t dropout_seed);

  // Pulls every variable from its ps. Errors: those of PsClient::Pull.
  absl::Status PullAll();

  // One training step on (x, y); pulls first if nothing was pulled yet.
  // Errors: INVALID_ARGUMENT shapes that do not fit the model; PsClient errors.
  absl::StatusOr<StepResult> Step(const Tensor& x, const Tensor& y);

  int64_t steps_done() const { return steps_done_; }

 private:
  PsTrainer(Model* model, std::vector<PsClient*> ps, std::vector<int> owner,
            uint64_t dropout_seed);

  Model* const model_;                 // Not owned.
  const std::vector<PsClient*> ps_;    // Not owned.
  // owner_[i]: the ps index of trainable variable i; by_ps_[p]: variable indices on ps p.
  const std::vector<int> owner_;
  std::vector<std::vector<int>> by_ps_;
  std::vector<std::string> names_;
  std::vector<Tensor> weights_;
  std::vector<Tensor> gradients_;
  bool have_weights_ = false;
  uint64_t dropout_seed_;
  int64_t steps_done_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_PS_TRAINER_H_
