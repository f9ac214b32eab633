#ifndef PSTRAIN_DISTRIBUTE_MIRRORED_STRATEGY_H_
#define PSTRAIN_DISTRIBUTE_MIRRORED_STRATEGY_H_

// tf.distribute.MirroredStrategy: one process trains K replicas in lockstep, one per local
// device ("cpu:0,cpu:1" or "cuda:0,cuda:1"), each on its own thread. Fit splits the global
// batch across the replicas, Run() steps them all at once, Reduce() sums their gradients
// in replica order (deterministic) and one optimizer update follows: the replicas share
// one copy of the weights, so they are identical after every step by construction.
//
// Thread-safety: driven by one training-loop thread, as every Strategy. Run() calls
// step_fn(0) on the calling thread and step_fn(r) for r >= 1 on replica r's own thread
// (started once, kept for the strategy's life), so a replica's backend always sees the
// same thread (a CUDA device stays current on it).

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "distribute/strategy.h"

namespace pstrain {

// Parses a --devices value: comma-separated "cpu:N" / "cuda:N" (spaces ignored). Empty:
// every CUDA device that answers (common/math/backend_factory.h), else one "cpu:0".
// Errors: INVALID_ARGUMENT for any other form or a device named twice (named).
absl::StatusOr<std::vector<std::string>> ParseMirroredDevices(absl::string_view devices);

// The CreateBackend device string for a mirrored device: "cpu:N" -> "cpu" (CPU replicas
// are threads; N only tells them apart), "cuda:N" -> "cuda:N".
std::string BackendDeviceFor(const std::string& device);

class MirroredStrategy : public Strategy {
 public:
  // `devices` as ParseMirroredDevices returns them; at least one.
  explicit MirroredStrategy(std::vector<std::string> devices);
  ~MirroredStrategy() override;
  MirroredStrategy(const MirroredStrategy&) = delete;
  MirroredStrategy& operator=(const MirroredStrategy&) = delete;

  std::string name() const override { return "mirrored"; }
  int num_replicas_in_sync() const override { return static_cast<int>(devices_.size()); }
  const std::vector<std::string>& devices() const { return devices_; }

  // Every replica runs, also when an earlier one failed; the first error in replica
  // order is returned.
  absl::Status Run(const std::function<absl::Status(int replica)>& step_fn) override;

 private:
  void ReplicaLoop(int replica);

  const std::vector<std::string> devices_;
  std::vector<std::thread> threads_;  // replicas 1..K-1

  // State below is protected by mu_.
  absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // one per Run()
  const std::function<absl::Status(int)>* step_fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// Errors: ParseMirroredDevices's.
absl::StatusOr<std::unique_ptr<MirroredStrategy>> CreateMirroredStrategy(
    absl::string_view devices);

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_MIRRORED_STRATEGY_H_
