#ifndef PSTRAIN_PS_SERVER_CLIENT_CHECKPOINTER_H_
#define PSTRAIN_PS_SERVER_CLIENT_CHECKPOINTER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/checkpoint/checkpoint.h"
#include "common/model/job_spec.h"
#include "common/training/training_observer.h"
#include "common/json_value.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/chief.pb.h"
#include "ps_server/client/sharded_variables.h"

namespace pstrain {

// The chief's checkpoints: when one is due (every N global steps, every interval, on
// request), writing one and restoring one onto the ps tasks, in the training-state layout
// every trainer shares (common/training/training_state.h). When every ps has the
// checkpoint folder (its --checkpoint_dir, shared with the chief's) a checkpoint is
// sharded (format v2): each ps writes and restores its own rows, and the chief writes
// only the manifest, after every ps answered. Otherwise (a ps without the folder, or one
// that does not see the chief's folder: one log line says which) every shard's state is
// read from the ps tasks and reassembled into whole variables (format v1). The coordinator
// decides where in the epoch a write happens (between chunks, or live) and what the epoch
// in progress records (its data position).
//
// Thread-safety: Write is serialized internally (the writer is not thread-safe; a live
// checkpoint is written from a worker's thread); Due, Request and AwaitWrite may be called
// from any thread (SaveCheckpointNow comes from the chief's RPC threads).
class Checkpointer {
 public:
  struct Options {
    // Where checkpoints are written; empty = none (enabled() is false).
    std::string dir;
    // The newest this many are kept.
    int keep = 3;
    // Merged into every checkpoint's metadata (e.g. "job_dir").
    JsonValue metadata;  // null: none
    // Triggers besides the epoch ends the coordinator asks for and requests: every this
    // many global steps (0 = never), every this much time (zero = never).
    int64_t every_steps = 0;
    absl::Duration every = absl::ZeroDuration();
    // Fault injection for tests (CheckpointWriter::Options::delay_before_commit).
    absl::Duration commit_delay = absl::ZeroDuration();
    // Told of every checkpoint written or failed to write. Not owned; may be null.
    TrainingObserver* observer = nullptr;
  };

  // `job` and `variables` are not owned and must outlive this.
  Checkpointer(Options options, const JobSpec* job, const ShardedVariables* variables);

  bool enabled() const { return writer_ != nullptr; }
  const std::string& dir() const { return options_.dir; }

  // The triggers count from here: steps from `global_step`, time from now.
  void Start(int64_t global_step) ABSL_LOCKS_EXCLUDED(mu_);

  // A trigger fired (a request, every_steps since the last write at `global_step`, or
  // `every` since it) and no checkpoint was written since. False when not enabled().
  bool Due(int64_t global_step) const ABSL_LOCKS_EXCLUDED(mu_);
  // The newest checkpoint (or the state Start counted from: a restored one, or the fresh
  // start) is of `global_step`: writing another would save nothing new.
  bool IsCurrent(int64_t global_step) const ABSL_LOCKS_EXCLUDED(mu_);
  // A request (Request) waits to be served.
  bool Requested() const ABSL_LOCKS_EXCLUDED(mu_);

  // Reads every shard's state and writes the checkpoint of `epochs_done` completed epochs
  // at `global_step`. `position` (may be null: at an epoch's end) is where the epoch in
  // progress stands, recorded as the metadata's "data_position". Serves every request
  // made before it.
  // Errors: the first failed ps read (naming the ps); INTERNAL a failed write (naming
  //         the path); FAILED_PRECONDITION not enabled().
  absl::Status Write(int epochs_done, int64_t global_step, const nlohmann::json* position)
      ABSL_LOCKS_EXCLUDED(write_mu_, mu_);

  // Asks for a checkpoint as soon as possible; returns the number of checkpoints written
  // so far, for AwaitWrite.
  int64_t Request() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `timeout` for a checkpoint written after `written_before` (Request's
  // value) and returns it.
  // Errors: FAILED_PRECONDITION the job ended first (EndJob: "the job failed before the
  //         checkpoint was written[: <the last write's error>]", or it finished);
  //         DEADLINE_EXCEEDED none written in time (the request stays pending).
  absl::StatusOr<SaveCheckpointResponse> AwaitWrite(int64_t written_before,
                                                    absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The job is over (`failed` or not): wakes every AwaitWrite.
  void EndJob(bool failed) ABSL_LOCKS_EXCLUDED(mu_);

  // The newest checkpoint written (empty path: none yet).
  SaveCheckpointResponse last() const ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces every shard's state with `checkpoint`'s, for the current placement (which
  // may differ from the one that wrote it). A sharded checkpoint in dir() is restored by
  // the ps tasks themselves, each reading its rows; one elsewhere, or one the ps cannot
  // read (no --checkpoint_dir), is read whole here and sliced.
  // Errors: DATA_LOSS a malformed training state or shard file; INVALID_ARGUMENT it does
  //         not fit the model; the first failed ps call.
  absl::Status Restore(const CheckpointReader& checkpoint) const;

  // Whether the ps tasks can restore `checkpoint` themselves: a sharded one in dir().
  bool RestorableByPs(const CheckpointReader& checkpoint) const;
  // Ps `p` (every ps when p < 0) restores its shards, created already, from `checkpoint`
  // (RestorableByPs): the recovery of a ps that came back empty.
  // Errors: FAILED_PRECONDITION not RestorableByPs; the first failed ps call.
  absl::Status RestoreShards(const CheckpointReader& checkpoint, int p) const;

  // The newest good checkpoint in dir() (a corrupt newest one is reported and skipped),
  // a sharded one opened without its tensors (Restore has the ps read them).
  // Errors: FAILED_PRECONDITION not enabled(); CheckpointReader::Open's (NOT_FOUND none).
  absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenLatest() const;

 private:
  // Write's two formats. WriteSharded answers FAILED_PRECONDITION when a ps cannot write
  // into the folder (Write then falls back to WriteWhole for good).
  absl::StatusOr<std::string> WriteSharded(int epochs_done, int64_t global_step,
                                           const nlohmann::json& metadata)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::StatusOr<std::string> WriteWhole(int epochs_done, int64_t global_step,
                                         const nlohmann::json& metadata)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Whether a sharded write is possible now; logs once why not.
  bool UseSharded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // `checkpoint` as the ps tasks can restore it (a sharded one in dir()): its folder
  // name; empty when they cannot.
  std::string ShardedName(const CheckpointReader& checkpoint) const;
  // Restore's whole-variable path, reading the tensors first when `checkpoint` was opened
  // without them.
  absl::Status RestoreWhole(const CheckpointReader& checkpoint) const;

  const Options options_;
  const JobSpec* const job_;                   // Not owned.
  const ShardedVariables* const variables_;    // Not owned.
  std::unique_ptr<CheckpointWriter> writer_;   // null without a dir

  // Serializes writes.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // A sharded write failed because a ps cannot reach the folder, or was found
  // impossible and said so: every later write is whole.
  bool whole_only_ ABSL_GUARDED_BY(write_mu_) = false;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  absl::Time last_time_ ABSL_GUARDED_BY(mu_);
  int64_t last_step_ ABSL_GUARDED_BY(mu_) = 0;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  int64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  SaveCheckpointResponse last_ ABSL_GUARDED_BY(mu_);
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  bool job_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool job_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_CHECKPOINTER_H_
