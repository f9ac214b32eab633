#ifndef PSTRAIN_PS_SERVER_CHECKPOINT_SHARDS_H_
#define PSTRAIN_PS_SERVER_CHECKPOINT_SHARDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/checkpoint/shard_files.h"
#include "ps_server/variable_store.h"

namespace pstrain {

// A ps's part of a sharded checkpoint (format v2, common/checkpoint/checkpoint.h): writes
// its shards' values, optimizer slots and counts into a shard file of the chief's
// temporary checkpoint folder, and restores its shards from a committed checkpoint,
// reading each of its rows from whichever shard files hold them (the checkpoint may have
// been written by another number of ps).
//
// Every folder is under `root` (the ps's --checkpoint_dir, the same shared folder as the
// chief's) and named by the caller only by a folder name that must match the checkpoint
// patterns (shard_files.h: no '/', no ".."), so a caller cannot make the ps write or read
// anywhere else. Everything read from the folder is untrusted: sizes and shapes are
// checked against this ps's variables, and a restore reads every block it needs twice:
// first to verify its CRC-32C and that every value is finite, then (nothing has changed
// until then) straight into the variables, so that it never holds a second copy of a
// shard that may fill most of the ps's memory.
//
// Thread-safety: calls may come from any thread; a Write and a Restore of the same
// folder at once are the caller's (the chief's) mistake, not a crash.
class CheckpointShards {
 public:
  struct Options {
    // Block size of the files written (tests use small ones).
    int64_t block_bytes = kShardBlockBytes;
    // Fault injection: a pause after the shard file is written and before it is synced
    // and answered, so a test can kill the ps in the middle of writing its shard.
    absl::Duration delay_before_sync = absl::ZeroDuration();
  };

  // `store` is not owned.
  CheckpointShards(VariableStore* store, std::string root, Options options);

  const std::string& root() const { return root_; }

  // Writes the shards `slices` name into <root>/<checkpoint>/shard-<ps_index>, fsynced.
  // Errors: INVALID_ARGUMENT `checkpoint` is not a temporary checkpoint folder's name, a
  //         slice that does not fit its variable or the shard held here, a shard named
  //         twice, ps_index out of [0, 99999]; FAILED_PRECONDITION the folder does not
  //         exist here (the chief's folder is not shared with this ps); NOT_FOUND an
  //         unknown shard; INTERNAL a failed file-system call.
  absl::StatusOr<ShardFile> Write(const std::string& checkpoint, int ps_index,
                                  const std::vector<ShardSlice>& slices) const;

  // Replaces the value, slots, iterations and version of each shard `slices` names with
  // what committed checkpoint <root>/<checkpoint> holds for its rows, in place: nothing
  // changes unless every block verifies (VariableStore::RestoreInPlace; only a file
  // changed between the two reads can leave a restore part-way, and then it says so).
  // Errors: INVALID_ARGUMENT a bad folder name or slice, or the checkpoint's tensor of
  //         another shape than the slice's variable; FAILED_PRECONDITION no such folder
  //         here; NOT_FOUND an unknown shard, or the checkpoint lacks a tensor;
  //         DATA_LOSS a malformed manifest, a missing or corrupt shard file;
  //         INVALID_ARGUMENT a value or slot that is not finite; and
  //         VariableStore::RestoreInPlace's.
  absl::Status Restore(const std::string& checkpoint, const std::vector<ShardSlice>& slices) const;

 private:
  // <root>/<checkpoint>, a real folder (not a link). Errors: as Write's for the folder.
  absl::StatusOr<std::string> Folder(const std::string& checkpoint, bool committed) const;
  // Each slice checked against itself and the shard held here.
  absl::Status CheckSlices(const std::vector<ShardSlice>& slices) const;

  VariableStore* const store_;  // Not owned.
  const std::string root_;
  const Options options_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CHECKPOINT_SHARDS_H_
