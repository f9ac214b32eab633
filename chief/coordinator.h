#ifndef PSTRAIN_CHIEF_COORDINATOR_H_
#define PSTRAIN_CHIEF_COORDINATOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps_server/client/checkpointer.h"
#include "chief/membership.h"
#include "chief/shard_queue.h"
#include "common/checkpoint/checkpoint.h"
#include "common/data/dataset.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "common/sharding/placement_policy.h"
#include "common/training/epoch_summary.h"
#include "common/daemon/shutdown_signal.h"
#include "common/training/training_observer.h"
#include "distribute/closure_scheduler.h"
#include "distribute/job_phase.h"
#include "proto/chief.pb.h"
#include "proto/ps.pb.h"
#include "ps_server/client/ps_recovery.h"
#include "ps_server/client/sharded_variables.h"
#include "ps_server/client/sharded_evaluator.h"
#include "ps_server/ps_client.h"
#include "worker/worker_client.h"

namespace pstrain {

// Where a parameter-server job stands, as the chief's GetStatus reports it (a proto enum
// on the wire: distribute/job_phase.h).
using JobPhase = distribute::JobPhase;

// Runs a parameter-server job from the chief (TensorFlow's ClusterCoordinator): waits for
// every task, splits and places the variables (Options::placement_policy) and creates each
// shard on its ps with its rows of the initial value, gives each worker its data shard
// epoch by epoch in chunks of steps, aggregates the workers' figures weighted by samples,
// evaluates on the validation data and reports each epoch. Knows nothing of gRPC: peers
// are PsClient and WorkerClient. Run() is called once; Describe() from any thread.
// Where the variables live and how they move is ShardedVariables'; when and how a
// checkpoint is written or restored, the Checkpointer's; this class schedules the work.
//
// Each epoch's data is one shard per worker, scheduled at least once (a ShardQueue). The
// training is a user of the closure scheduler (distribute/closure_scheduler.h), as Keras
// fit is of ClusterCoordinator: a chunk of steps is a closure, which takes its chunk from
// the ShardQueue when it is dispatched (its worker's own shard first, then the one it ran
// last, then any unfinished one) and queues its successor; an epoch segment ends at a
// Join (the barrier). What a failed RunSteps means is distribute/failure.h's rule: a
// worker whose RunSteps is UNAVAILABLE, DEADLINE_EXCEEDED or CANCELLED (it is shutting
// down) is lost: its chunk is returned to the ShardQueue and run again from its first
// step by another worker, and it takes no more work until a segment starts while it
// heartbeats again and answers ready (e.g. it was restarted and re-registered). ABORTED is
// a failed ps: the scheduler lets the chunks in flight return, RecoverPs runs once, and
// the chunk runs again.
class Coordinator {
 public:
  // Examples per Model::Evaluate call of the validation after each epoch: large batches
  // evaluate fastest, and the result does not depend on it.
  static constexpr int64_t kValidationBatch = 1000;

  struct Options {
    absl::Duration register_timeout = absl::Seconds(60);
    // Steps per RunSteps call: smaller chunks mean finer progress and shorter deadlines.
    int64_t steps_per_call = 100;
    // A lost worker is tried again at the start of an epoch only when its last heartbeat
    // is at most this old and came after it was lost (Membership::IsLive).
    absl::Duration rejoin_heartbeat_age = absl::Seconds(3);
    // Where workers reach each ps (the cluster spec's addresses), in ps order.
    std::vector<std::string> ps_addresses;
    // How variables are split and spread over the ps tasks (the job's "placement").
    PlacementPolicy placement_policy;
    // How every ps orders the workers' pushes (the job's "consistency", resolved for the
    // cluster: see ResolveConsistency); default async.
    ConsistencyConfig consistency;
    // Where and when checkpoints are written (the last one at the end of the job); an
    // empty checkpoint.dir = no checkpoints. Its observer is ignored: the Checkpointer
    // tells `observer` below. Triggers besides the end of the job, all with a dir: the
    // Checkpointer's (every_steps, every), every epoch end, and on demand
    // (SaveCheckpointNow).
    Checkpointer::Options checkpoint;
    bool checkpoint_every_epoch = true;
    // A mid-epoch checkpoint waits for every chunk in flight to return and hands out no
    // new one meanwhile, so no push is in flight and every shard belongs to one step.
    // false: read every ps while the workers go on pushing (no pause; shards may then be
    // a few steps apart, as TensorFlow's asynchronous checkpoints are).
    bool consistent_checkpoints = true;
    // A ps that fails (a worker reports it unreachable or missing its variables) pauses
    // training; this long is waited for it to answer again before the job fails.
    absl::Duration ps_recovery_timeout = absl::Seconds(120);
    // Told of every chunk of steps answered, checkpoint written or failed, worker lost and
    // ps recovered (metrics, progress bar, TensorBoard, dashboard). Not owned; may be
    // null. Called from the workers' threads too.
    TrainingObserver* observer = nullptr;
  };

  // Pointers are not owned and must outlive the coordinator. `model` gives the variables
  // and their initial values, and evaluates on `validation` (may be null). `restore`
  // (may be null) is a verified checkpoint to continue from: after the variables are
  // created, every shard's value, optimizer slots and iterations are replaced by the
  // checkpoint's, sliced for the CURRENT placement (so the number of ps and the partition
  // policy may differ from the run that wrote it), and training continues with the epoch
  // after the checkpoint's and its global step.
  Coordinator(Options options, const JobSpec* job, Model* model, Membership* membership,
              std::vector<PsClient*> ps, std::vector<WorkerClient*> workers,
              const Dataset* validation, const ShutdownSignal* abort,
              std::function<void(const EpochSummary&)> on_epoch,
              const CheckpointReader* restore = nullptr);

  // Errors: DEADLINE_EXCEEDED tasks never registered (named); the first error of a ps
  //         call, or of a worker call other than an unreachable worker (naming the task);
  //         UNAVAILABLE every worker was lost during an epoch (naming them);
  //         CANCELLED when `abort` was requested; ABORTED after Preempt();
  //         INVALID_ARGUMENT the checkpoint to restore does not fit the model (a missing
  //         variable or another shape) or its slots do not fit the optimizer; a failed
  //         checkpoint write (INTERNAL, naming the path).
  absl::Status Run();

  // The model's weights as the ps tasks hold them now (for an export once Run returned).
  // Errors: the first failed pull, naming the ps.
  absl::StatusOr<std::vector<Tensor>> PullWeights() const { return variables_.Pull(); }

  // Phase, epoch, step and placement (one entry per shard) for the chief's GetStatus.
  void Describe(ChiefStatusResponse* response) const ABSL_LOCKS_EXCLUDED(mu_);

  // Stops training for a restart, as TensorFlow's PreemptionCheckpointHandler does on
  // SIGTERM: no new chunk is handed out; once the chunks in flight are back, a consistent
  // checkpoint is written (with a checkpoint.dir, unless the newest one is of this very
  // step) and Run() returns ABORTED naming it. The tasks are not told anything: a
  // restarted chief re-attaches them and resumes from that checkpoint. Returns false, and
  // does nothing, before training started (waiting for tasks) and after it ended.
  // Thread-safe; called from the signal thread.
  bool Preempt() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether Preempt() took effect.
  bool preempted() const ABSL_LOCKS_EXCLUDED(mu_);

  // Asks for a checkpoint as soon as possible (after the chunks in flight, in consistent
  // mode) and waits up to `timeout` for one written after the request. Returns its path.
  // Thread-safe; called from the chief's RPC threads.
  // Errors: FAILED_PRECONDITION no checkpoint.dir, or the job is not training (over,
  //         failed, or not started: the message says which); DEADLINE_EXCEEDED none
  //         written in time (the request stays pending); the write's own error.
  absl::StatusOr<SaveCheckpointResponse> SaveCheckpointNow(absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Registration comes before a worker has built its job: wait until each says ready.
  absl::Status WaitForWorkersReady();
  // Makes the scheduler of the chunks over every worker (none lost yet).
  void StartScheduler();
  // "steps run per worker: N M": the steps each worker's chunks answered over the job
  // (a chunk that ran again after its worker was lost counts once, for the one that
  // answered).
  void LogStepsPerWorker() const ABSL_LOCKS_EXCLUDED(mu_);
  // Places and creates the variables, and logs where each shard went.
  absl::Status CreateVariables();
  // Restores restore_ onto the ps tasks and sets the step counters from it. Returns the
  // first epoch to train (0-based) and sets `*resume` to the checkpoint's position in it
  // (null: from its beginning).
  absl::StatusOr<int> RestoreCheckpoint(const nlohmann::json** resume);
  // Runs epoch `epoch` (0-based), from `resume`'s data positions when not null.
  absl::Status RunEpoch(int epoch, EpochSummary* summary, const nlohmann::json* resume);
  // What every RunSteps of epoch `epoch` carries (shard, steps and generation aside).
  RunStepsRequest EpochRequest(int epoch) const;
  // One segment of an epoch on the scheduler: a chunk closure per live worker, each
  // queueing its successor, until `queue` is done or paused (Join is the barrier); their
  // figures are added to `epoch_figures`, the workers found lost are marked in lost_, a
  // failed ps is recovered (RecoverPsDuringEpoch) and its chunks run again.
  // Errors: the first worker's failure that is neither a lost worker nor a failed ps; the
  // ps recovery's; CANCELLED on abort; a live checkpoint's failed write.
  struct SegmentRun;
  class ChunkClosure;
  absl::Status RunSegment(const RunStepsRequest& base, ShardQueue* queue,
                          RunStepsResponse* epoch_figures);
  // A chunk closure's work on worker `w`: takes a chunk of the segment's queue (none:
  // returns OK with `*ran` false), runs it with the segment's request and adds its figures
  // to the worker's total. Returns the RunSteps failure (the chunk given back to the
  // queue) for the scheduler to classify; the chief's own failures (abort, a live
  // checkpoint's write) are the segment's error instead. Pauses the queue when a
  // checkpoint is due.
  absl::Status RunChunk(int w, SegmentRun* segment, bool* ran);
  // The scheduler's recover_ps during an epoch: RecoverPs, unless the ps keeps failing
  // without a step of progress (recoveries in a row, spaced out while the workers'
  // channels reconnect, then UNAVAILABLE), then lets the lost workers that are back rejoin.
  absl::Status RecoverPsDuringEpoch();
  // A lost worker (the scheduler's on_worker_lost): marked in lost_, told to the observer.
  void MarkLost(int w) ABSL_LOCKS_EXCLUDED(mu_);
  bool EveryWorkerLost() const ABSL_LOCKS_EXCLUDED(mu_);
  // Adds a chunk's answer to the epoch's progress and tells the observer.
  void ReportSteps(int w, const RunStepsRequest& base, const RunStepsResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A checkpoint is due after a chunk: in consistent mode the queue pauses (the epoch
  // loop writes); otherwise this worker's thread writes one now unless another does.
  absl::Status CheckpointAfterChunk(const RunStepsRequest& base, ShardQueue* queue);
  // Recovers a failed ps (PsRecovery::Recover) with the job phase "recovering"
  // meanwhile, and bumps ps_generation_ so the workers pull afresh. Errors: UNAVAILABLE
  // naming the ps that did not come back; CANCELLED on abort; ABORTED after Preempt(); a
  // failed create or restore.
  absl::Status RecoverPs();
  // Between the census rounds of a recovery: waits up to `timeout` unless the chief is
  // preempted (ABORTED) or shutting down (CANCELLED).
  absl::Status WaitDuringRecovery(absl::Duration timeout) const;
  // Runs `step` (a validation or checkpoint read); when it fails because a ps is gone,
  // recovers the ps and runs it once more.
  absl::Status RetryAfterPsRecovery(const std::function<absl::Status()>& step);
  // At a segment's start and after a ps recovery: lost workers that heartbeat and answer
  // ready again take work.
  void RejoinLostWorkers(int epoch) ABSL_LOCKS_EXCLUDED(mu_);
  // Evaluates the weights on the ps tasks on the validation data: the dense variables
  // pulled whole, an Embedding table by the rows each batch needs (the figures are those
  // of the whole weights).
  absl::Status Validate(EpochSummary* summary);
  // Writes a checkpoint of `epochs_done` completed epochs at the current global step;
  // `position` (may be null: at an epoch's end) is where the epoch in progress stands.
  absl::Status WriteCheckpoint(int epochs_done, const nlohmann::json* position)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A checkpoint trigger fired, or a preemption waits for a checkpoint of this step.
  bool CheckpointDue() const ABSL_LOCKS_EXCLUDED(mu_);
  // After Preempt(), between epochs: writes the checkpoint a restarted chief resumes
  // from (unless the newest one is of this step) and returns PreemptedStatus().
  absl::Status StopForRestart(int epochs_done);
  // ABORTED "preempted at step N; the newest checkpoint is ...", what Run() returns after
  // Preempt().
  absl::Status PreemptedStatus() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t global_step() const ABSL_LOCKS_EXCLUDED(mu_);
  void SetPhase(JobPhase phase) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  const JobSpec* const job_;               // Not owned.
  Model* const model_;                     // Not owned.
  Membership* const membership_;           // Not owned.
  const std::vector<PsClient*> ps_;        // Not owned.
  const std::vector<WorkerClient*> workers_;  // Not owned.
  const Dataset* const validation_;        // Not owned; may be null.
  const ShutdownSignal* const abort_;      // Not owned.
  const std::function<void(const EpochSummary&)> on_epoch_;
  const CheckpointReader* const restore_;  // Not owned; may be null.
  ShardedVariables variables_;
  // Validation, without gathering an Embedding table.
  ShardedEvaluator evaluator_;
  Checkpointer checkpointer_;
  PsRecovery ps_recovery_;
  // The workers as the scheduler sees them (ready unless lost_), and the scheduler of the
  // chunks; made by Run() once the workers are ready, gone when it returns.
  std::vector<std::unique_ptr<distribute::ScheduledWorker>> scheduled_workers_;
  std::unique_ptr<distribute::ClosureScheduler> scheduler_;
  // Ps recoveries in a row without a step of progress, and the global step at the last
  // one: RecoverPsDuringEpoch's (one at a time, with no chunk in flight) and RunEpoch's.
  int recoveries_without_progress_ = 0;
  int64_t step_at_last_recovery_ = 0;
  // Changes whenever the ps state is replaced behind the workers' backs (a restore, a ps
  // recovery), so each worker pulls afresh before its next step. Starts from the clock:
  // a restarted chief does not repeat its predecessor's values.
  int64_t ps_generation_ = 0;
  // Set while a worker's thread writes a live (non-consistent) checkpoint.
  std::atomic<bool> live_write_{false};
  // The epoch's figures before the segment running now (a live checkpoint records
  // them); written by the epoch loop only between segments.
  const RunStepsResponse* segment_start_figures_ = nullptr;

  // State below is protected by mu_ (read by Describe from RPC threads).
  mutable absl::Mutex mu_;
  JobPhase phase_ ABSL_GUARDED_BY(mu_) = JobPhase::kWaitingForTasks;
  int epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t global_step_ ABSL_GUARDED_BY(mu_) = 0;
  // The queue of the epoch segment running now (null between segments): a checkpoint
  // request pauses it.
  ShardQueue* running_queue_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool preempted_ ABSL_GUARDED_BY(mu_) = false;
  // Workers found unreachable, by index: they take no chunk until RejoinLostWorkers.
  std::vector<bool> lost_ ABSL_GUARDED_BY(mu_);
  // Steps each worker's chunks answered over the job (logged at its end).
  std::vector<int64_t> steps_per_worker_ ABSL_GUARDED_BY(mu_);
  // The chunks of the epoch in progress whose worker was lost before they answered, by
  // (shard, first step), with that worker's name: the run that answers one logs it.
  std::map<std::pair<int, int64_t>, std::string> lost_chunks_ ABSL_GUARDED_BY(mu_);
  // The epoch in progress as the observer sees it: its start, its figures so far, and
  // the steps it will take (steps_per_epoch, else the last epoch's; 0 before one ended).
  absl::Time epoch_start_ ABSL_GUARDED_BY(mu_);
  RunStepsResponse epoch_progress_ ABSL_GUARDED_BY(mu_);
  int64_t expected_epoch_steps_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_COORDINATOR_H_
