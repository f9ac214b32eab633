#ifndef PSTRAIN_DISTRIBUTE_STRATEGY_H_
#define PSTRAIN_DISTRIBUTE_STRATEGY_H_

// The public seam a training loop stands on, shaped like tf.distribute.Strategy: a loop
// (Fit, or a user's own) asks how many replicas step in lockstep, runs its per-replica
// step function through Run(), and combines per-replica values with Reduce(). Which
// strategy runs underneath (one process, local replicas, all-reduce across workers) is
// invisible to the loop, so the same loop serves them all.
//
//   std::unique_ptr<Strategy> strategy = CreateDefaultStrategy();
//   std::vector<std::vector<float>> grads(strategy->num_replicas_in_sync());
//   PS_RETURN_IF_ERROR(strategy->Run([&](int replica) -> absl::Status {
//     ...compute grads[replica] on this replica's slice of the global batch...
//   }));
//   PS_ASSIGN_OR_RETURN(std::vector<float> sum, strategy->Reduce(ReduceOp::kSum, spans));
//
// Thread-safety: a Strategy is driven by one training loop thread; Run() may call
// step_fn from several threads at once (one per replica) in strategies with more than one
// replica, so step_fn must only touch its own replica's state.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain {

// tf.distribute.ReduceOp.
enum class ReduceOp { kSum, kMean };

class Strategy {
 public:
  virtual ~Strategy() = default;

  // "default", "mirrored", "multi_worker_mirrored", ...
  virtual std::string name() const = 0;

  // Replicas that take one step together; the global batch is split across them.
  virtual int num_replicas_in_sync() const = 0;

  // Replicas this process runs: [first_local_replica(), first_local_replica() +
  // num_local_replicas()). One-process strategies run them all; a multi-worker strategy
  // runs a part and sums the rest in with CrossWorkerSum.
  virtual int first_local_replica() const { return 0; }
  virtual int num_local_replicas() const { return num_replicas_in_sync(); }

  // Calls step_fn(replica) once for every local replica (global replica ids, see above)
  // and returns when all have finished. Returns the first non-OK status in replica order
  // (so an error names the same replica whatever the timing); every replica still runs.
  virtual absl::Status Run(const std::function<absl::Status(int replica)>& step_fn) = 0;

  // Element-wise sum or mean over this process's replicas of one vector per local
  // replica (all the same length). The implementation here adds in replica order, so
  // results are deterministic. Cross-worker sums are CrossWorkerSum's job.
  // Errors: INVALID_ARGUMENT when per_replica.size() != num_local_replicas() or the
  // lengths differ (both named in the message).
  virtual absl::StatusOr<std::vector<float>> Reduce(
      ReduceOp op, absl::Span<const absl::Span<const float>> per_replica) const;

  // Replaces each tensor, in place, by its element-wise sum over every worker process in
  // sync (an all-reduce); every process must call it with the same shapes in the same
  // order. Default (one process): leaves the values alone and returns OK.
  // Errors (multi-worker strategies): DEADLINE_EXCEEDED / UNAVAILABLE naming the worker
  // that did not answer; INTERNAL when workers disagree about the shapes.
  virtual absl::Status CrossWorkerSum(absl::Span<const absl::Span<float>> tensors) {
    (void)tensors;
    return absl::OkStatus();
  }

  // Checks that `weights` are bit-identical in every worker process (a cheap fingerprint
  // compared through the all-reduce); a collective, so every process calls it at the same
  // step. Default (one process: local replicas share one copy of the weights): OK.
  // Errors: FAILED_PRECONDITION when the weights differ; CrossWorkerSum's errors.
  virtual absl::Status CheckInSync(absl::Span<const absl::Span<const float>> weights) {
    (void)weights;
    return absl::OkStatus();
  }
};

// TensorFlow's default strategy: one replica, in this process, on the calling thread.
// Run() is a plain call; Reduce() of one vector is a copy (divided by 1 for kMean).
class DefaultStrategy : public Strategy {
 public:
  std::string name() const override { return "default"; }
  int num_replicas_in_sync() const override { return 1; }
  absl::Status Run(const std::function<absl::Status(int replica)>& step_fn) override;
};

std::unique_ptr<Strategy> CreateDefaultStrategy();

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_STRATEGY_H_
