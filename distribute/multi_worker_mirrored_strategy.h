#ifndef PSTRAIN_DISTRIBUTE_MULTI_WORKER_MIRRORED_STRATEGY_H_
#define PSTRAIN_DISTRIBUTE_MULTI_WORKER_MIRRORED_STRATEGY_H_

// tf.distribute.MultiWorkerMirroredStrategy: N worker processes (ring ranks) train
// synchronously, one replica each. Replica r is rank r; Fit builds the same global batch
// in every process and runs only this rank's slice; CrossWorkerSum is a ring all-reduce
// (distribute/allreduce/ring_allreduce.h) of the gradients of all variables together, so
// every worker applies the same update to the same weights.
//
// The first collective (the weight check Fit runs before step 1) waits up to
// startup_timeout, so workers that start seconds apart meet; every later one fails after
// `timeout` naming the worker that did not answer.
//
// Thread-safety: one training-loop thread, as every Strategy.

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "distribute/allreduce/collective_selection.h"
#include "distribute/allreduce/ring_allreduce.h"
#include "distribute/allreduce/ring_transport.h"
#include "distribute/strategy.h"

namespace pstrain {

struct MultiWorkerMirroredOptions {
  RingAllReduceOptions ring;  // ring.timeout: the deadline of every collective after the first
  absl::Duration startup_timeout = absl::Seconds(60);
};

class MultiWorkerMirroredStrategy : public Strategy {
 public:
  // `transport` is not owned and must outlive the strategy.
  MultiWorkerMirroredStrategy(RingTransport* transport, MultiWorkerMirroredOptions options);

  std::string name() const override { return "multi_worker_mirrored"; }
  int num_replicas_in_sync() const override { return ring_.size(); }
  int first_local_replica() const override { return ring_.rank(); }
  int num_local_replicas() const override { return 1; }

  // Calls step_fn(rank) on the calling thread.
  absl::Status Run(const std::function<absl::Status(int replica)>& step_fn) override;
  absl::Status CrossWorkerSum(absl::Span<const absl::Span<float>> tensors) override;
  // Sums a 32-bit fingerprint of the weights, split in 16-bit halves (exact in float), over
  // the workers: equal weights everywhere give exactly n times this worker's halves.
  // Errors: FAILED_PRECONDITION "weights differ between workers at check N"; the ring's.
  absl::Status CheckInSync(absl::Span<const absl::Span<const float>> weights) override;

  // From now on CrossWorkerSum uses `collective` (NCCL, chosen by SelectCollective over this
  // strategy's ring) instead of the ring; it takes the strategy's timeout.
  void UseCollective(std::unique_ptr<CrossWorkerCollective> collective);
  // A ring all-reduce before training (SelectCollective's agreement): it waits up to the
  // startup timeout and leaves the first CrossWorkerSum's startup timeout in place.
  absl::Status RingSumAtStartup(absl::Span<const absl::Span<float>> tensors);

 private:
  MultiWorkerMirroredOptions options_;
  RingAllReduce ring_;
  std::unique_ptr<CrossWorkerCollective> collective_;  // null: the ring
  bool started_ = false;
  int64_t checks_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_MULTI_WORKER_MIRRORED_STRATEGY_H_
