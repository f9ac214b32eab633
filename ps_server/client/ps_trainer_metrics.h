#ifndef PSTRAIN_PS_SERVER_CLIENT_PS_TRAINER_METRICS_H_
#define PSTRAIN_PS_SERVER_CLIENT_PS_TRAINER_METRICS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace pstrain {

// What a PsTrainer (ps_server/client/ps_trainer.h) records of its steps, where its user
// wants them: an interface, so that the trainer, which the worker daemon and a custom
// loop's workers share, names no daemon's metrics. The worker daemon's WorkerMetrics
// (worker/worker_metrics.h) implements it with its Prometheus series.
//
// Thread-safety: an implementation is called by the trainer's thread; one shared by
// several trainers must be thread-safe.
class PsTrainerMetrics {
 public:
  virtual ~PsTrainerMetrics() = default;

  // A step's push went through: its examples, its forward and backward pass, and the
  // round trip that pushed its gradients and pulled the new values (every ps at once).
  virtual void RecordStep(int64_t samples, absl::Duration compute,
                          absl::Duration push_pull) = 0;
  // A pull apart from the push: every variable (the first step, or after a failed
  // exchange), or a row-sparse table's rows of the batch.
  virtual void RecordPull(absl::Duration pull) = 0;
  // A step's exchange failed: the next one pulls every value afresh.
  virtual void RecordRetry() = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_PS_TRAINER_METRICS_H_
