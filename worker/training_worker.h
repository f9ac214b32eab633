#ifndef PSTRAIN_WORKER_TRAINING_WORKER_H_
#define PSTRAIN_WORKER_TRAINING_WORKER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/data/batcher.h"
#include "common/data/dataset.h"
#include "common/math/backend.h"
#include "worker/worker_metrics.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "proto/worker.pb.h"
#include "ps_server/ps_client.h"
#include "ps_server/client/ps_trainer.h"
#include "worker/worker_functions.h"

namespace pstrain {

// The core of a worker task in parameter-server mode: the job's model and training data,
// and the steps the chief asks it to run. Knows nothing of gRPC servers
// (worker/rpc/worker_service.h serves it as a function). RunSteps calls are serialised;
// GetStatus may be called from any thread.
class TrainingWorker {
 public:
  using PsClientFactory =
      std::function<std::unique_ptr<PsClient>(int ps_index, const std::string& address)>;

  // Builds the model and loads the training data of `job_json` (the job as the chief
  // sent it; relative paths in it are relative to `base_dir`). Errors: INVALID_ARGUMENT a job spec, model or data source that does not
  // parse or load.
  static absl::StatusOr<std::unique_ptr<TrainingWorker>> Create(
      const std::string& job_json, const std::string& base_dir, int worker_index, std::unique_ptr<Backend> backend,
      PsClientFactory make_ps_client);

  // Runs request.steps batches of the request's shard and epoch, starting at
  // request.first_step, pulling from and pushing to the ps tasks it names.
  // Errors: INVALID_ARGUMENT bad shard, batch size, epoch, step or placement; FAILED_PRECONDITION
  //         another RunSteps is in progress; ps errors (naming the ps).
  absl::StatusOr<RunStepsResponse> RunSteps(const RunStepsRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // RunSteps as the built-in function "pstrain.train_chunk" (worker/worker_functions.h):
  // `arguments` a serialized RunStepsRequest, the result a serialized RunStepsResponse.
  // Errors: INVALID_ARGUMENT arguments that do not parse; those of RunSteps.
  absl::StatusOr<std::string> RunChunk(const std::string& arguments) ABSL_LOCKS_EXCLUDED(mu_);

  WorkerStatusResponse GetStatus() const;

  // Where steps are timed and counted (not owned; null: nowhere). Call before RunSteps.
  void set_metrics(WorkerMetrics* metrics) { metrics_ = metrics; }

  // Fault injection for tests: sleeps this long after every step's push, making this
  // worker a straggler (the consistency tests slow one worker down). Call before RunSteps.
  void SetStepDelayForTesting(absl::Duration delay) { step_delay_ = delay; }

 private:
  TrainingWorker(JobSpec job, bool sync, int worker_index, std::unique_ptr<Backend> backend,
                 std::unique_ptr<Model> model, std::shared_ptr<const Dataset> train,
                 PsClientFactory make_ps_client);

  absl::Status PrepareTrainer(const RunStepsRequest& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A failed step's status as RunSteps reports it: a ps failure becomes ABORTED (see
  // proto/worker.proto) and drops the trainer so the next chunk pulls afresh.
  absl::Status AsPsFailure(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PrepareBatcher(const RunStepsRequest& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobSpec job_;
  // Consistency mode sync: pushes carry the versions their gradients were computed at.
  const bool sync_;
  const int worker_index_;
  std::unique_ptr<Backend> backend_;
  const PsClientFactory make_ps_client_;
  absl::Duration step_delay_ = absl::ZeroDuration();
  std::atomic<int64_t> steps_done_{0};
  WorkerMetrics* metrics_ = nullptr;  // Not owned; may be null.
  std::atomic<bool> busy_{false};

  // State below is protected by mu_, held for the whole of a RunSteps call.
  absl::Mutex mu_;
  std::unique_ptr<Model> model_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Dataset> train_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> ps_addresses_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<PsClient>> ps_clients_ ABSL_GUARDED_BY(mu_);
  std::string placement_key_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PsTrainer> trainer_ ABSL_GUARDED_BY(mu_);
  // The batch order of (epoch, shard) and how far into it this worker is.
  std::unique_ptr<Batcher> batcher_ ABSL_GUARDED_BY(mu_);
  std::string batcher_key_ ABSL_GUARDED_BY(mu_);
  int64_t batcher_position_ ABSL_GUARDED_BY(mu_) = 0;
  // The rows of the training data of shard (index, count) the last chunk used, kept
  // across epochs: a shard's rows never change, only their order (the batcher's seed),
  // and cutting them out copies this worker's part of the data set (94 MB of
  // Fashion-MNIST per worker of two) at every epoch's start.
  std::shared_ptr<const Dataset> shard_ ABSL_GUARDED_BY(mu_);
  std::pair<int64_t, int64_t> shard_key_ ABSL_GUARDED_BY(mu_) = {-1, -1};
};

// Serves `worker` (not owned; it must outlive `functions`' use) as the built-in function
// kTrainChunkFunction of `functions`, whose status then reports the worker's (busy, steps
// done, backend). Errors: those of WorkerFunctions::Register.
absl::Status RegisterTrainChunk(TrainingWorker* worker, WorkerFunctions* functions);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_TRAINING_WORKER_H_
