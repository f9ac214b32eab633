#ifndef PSTRAIN_COMMON_CHECKPOINT_CHECKPOINT_H_
#define PSTRAIN_COMMON_CHECKPOINT_CHECKPOINT_H_

// The on-disk checkpoint format.
//
//   <root>/latest              one line: the name of the newest checkpoint ("ckpt-1200")
//   <root>/ckpt-<step>/manifest.json
//   <root>/ckpt-<step>/data-00000, data-00001, ...
//
// manifest.json: {"format": "pstrain-checkpoint", "version": 1, "step": S, "epoch": E,
//   "job_spec": {...}, "metadata": {...}, "data_files": ["data-00000", ...],
//   "tensors": [{"name", "dtype": "float32", "shape", "file", "offset", "length",
//                "crc32c"}, ...]}
// Tensor bytes are float32 little-endian, row-major, concatenated into data files of at
// most Options::max_data_file_bytes each (a larger tensor gets a file of its own); the
// CRC-32C covers exactly `length` bytes at `offset`.
//
// Durability: a checkpoint is written under a temporary directory (".tmp-ckpt-..."), every
// file fsynced, then renamed to ckpt-<step> and the root fsynced; `latest` is then
// replaced atomically (temp file, fsync, rename, fsync root). A crash at any point leaves
// the previous checkpoints and either the old or the new `latest`; a half-written temp
// directory is never read (only names "ckpt-<digits>" are).
//
// Format version 2 (sharded: written by the ps tasks, common/checkpoint/shard_files.h):
//
//   <root>/ckpt-<step>/manifest.json   written by the chief last, after every ps answered
//   <root>/ckpt-<step>/shard-00000, shard-00001, ...   one per ps, written and fsynced by it
//
// manifest.json: {"format": "pstrain-checkpoint", "version": 2, "step", "epoch",
//   "job_spec", "metadata" (as version 1's),
//   "files": [{"name": "shard-00000", "length", "crc32c"}, ...],
//   "tensors": [{"name", "dtype": "float32", "shape" (the whole tensor's),
//                "pieces": [{"file", "row_begin", "row_end",
//                            "blocks": [{"offset", "length", "row_begin", "row_end",
//                                        "crc32c"}, ...]}, ...]}, ...]}
// A tensor's pieces cover its rows (first axis; a scalar is one row) exactly once, each
// piece's blocks (at most 16 MiB each) its rows; each block's CRC-32C covers its bytes.
// The ps tasks write into the writer's temporary folder (BeginSharded), the chief commits
// it exactly as version 1 (CommitSharded). Any other version is refused with one line
// ("unsupported checkpoint format version N").
//
// Variables use the model's names ("dense/kernel"); optimizer slots are stored as
// "<variable>/optimizer/<slot>" and the per-variable update count in the metadata
// (see common/training/training_state.h), so this layer knows only named float tensors.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/checkpoint/shard_files.h"
#include "common/tensor.h"
#include "common/json_value.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

// Everything one checkpoint holds.
struct CheckpointContents {
  int64_t step = 0;  // global step at which it was taken
  int epoch = 0;     // epochs completed (1-based count; 0 = none)
  JsonValue job_spec;  // the job as the chief ran it
  JsonValue metadata;  // free-form, owned by the caller (null is written as {})
  std::vector<NamedTensor> tensors;  // unique, non-empty names
};

// Writes checkpoints under one root directory. Not thread-safe: one writer per root (the
// chief), calls in sequence.
class CheckpointWriter {
 public:
  struct Options {
    // Checkpoints to keep; older ones are deleted after each successful write. >= 1.
    int keep = 3;
    // Tensors are packed into data files of at most this size (a bigger tensor gets a
    // file of its own), so no single file grows without bound.
    int64_t max_data_file_bytes = int64_t{1} << 30;
    // Fault injection: a pause after every file of the checkpoint is written and synced
    // and before it is renamed into place, so a test can kill the writer mid-checkpoint.
    absl::Duration delay_before_commit = absl::ZeroDuration();
  };

  CheckpointWriter(std::string root, Options options);

  // Writes `contents` as <root>/ckpt-<step> (creating root if needed), points `latest`
  // at it and deletes all but the newest `keep` checkpoints and any stale temp
  // directories. Returns the checkpoint's path. Rewriting an existing step replaces it.
  // Errors: INVALID_ARGUMENT empty or duplicate tensor name, negative step, keep < 1;
  //         INTERNAL a file-system call failed (named with errno's text). On error the
  //         previous checkpoints and `latest` are untouched (the temp dir is removed).
  absl::StatusOr<std::string> Write(const CheckpointContents& contents);

  // Format version 2, in three steps: BeginSharded creates the temporary folder (whose
  // name, not path, it returns) that the ps tasks write their shard files into;
  // CommitSharded writes the manifest of `header` (step, epoch, job spec, metadata; its
  // tensors are ignored) and `files` into it and commits it as Write does (the
  // fault-injection delay included), then prunes; Abandon removes the folder of a write
  // that failed. A folder never committed is never read, and is removed by the next
  // write's prune or by RemoveStaleTemps.
  // Errors: as Write.
  absl::StatusOr<std::string> BeginSharded(int64_t step);
  absl::StatusOr<std::string> CommitSharded(const std::string& temp_name,
                                            const CheckpointContents& header,
                                            const std::vector<ShardFile>& files);
  void Abandon(const std::string& temp_name) const;
  // Removes every temporary folder under the root (a writer that crashed left it): call
  // when no write is under way (the chief at its start).
  void RemoveStaleTemps() const;

  // Creates the root if needed and writes, syncs and removes a probe file in it, so
  // that a directory the job cannot write to is found before training rather than at
  // the first checkpoint (whose epoch would be lost).
  // Errors: PERMISSION_DENIED or INTERNAL naming the directory and errno's text.
  absl::Status CheckWritable() const;

  const std::string& root() const { return root_; }

 private:
  // Write's steps: every tensor and the manifest into the folder `temp` (fsynced); then
  // `temp` renamed to `name` and "latest" pointed at it; then the checkpoints past
  // Options::keep, and temp folders crashed writers left, removed.
  absl::Status WriteInto(const std::string& temp, const CheckpointContents& contents) const;
  absl::Status Commit(const std::string& temp, const std::string& name) const;
  void Prune(const std::string& written, int64_t step) const;

  const std::string root_;
  const Options options_;
};

// One verified checkpoint, fully loaded. Immutable after Open: safe from any thread.
class CheckpointReader {
 public:
  // `path` is either a checkpoint directory (holding manifest.json) or a root directory,
  // in which case FindLatestGoodCheckpoint picks the checkpoint. Every tensor is read and
  // its CRC-32C verified before this returns.
  // Errors: NOT_FOUND no such checkpoint / no checkpoint under the root; DATA_LOSS a
  //         missing or malformed manifest, a missing or truncated data file, a CRC
  //         mismatch (each naming the file or tensor).
  //
  // A version-2 (sharded) checkpoint's tensors are read whole the same way, block by
  // block, unless `options.load_sharded_tensors` is false: then only its manifest and its
  // files' lengths are checked and tensors() is empty (tensors_loaded() false), for a
  // caller that has the ps tasks restore their own rows (ps_server/client/checkpointer.h).
  struct OpenOptions {
    bool load_sharded_tensors = true;
  };
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& path,
                                                                OpenOptions options);
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& path) {
    return Open(path, OpenOptions());
  }

  const std::string& path() const { return path_; }
  // The manifest's format version: 1 (written by the chief) or 2 (sharded).
  int version() const { return version_; }
  // False for a version-2 checkpoint opened without its tensors.
  bool tensors_loaded() const { return tensors_loaded_; }
  int64_t step() const { return contents_.step; }
  int epoch() const { return contents_.epoch; }
  const nlohmann::json& job_spec() const { return *contents_.job_spec; }
  // An object (empty when the writer gave none).
  const nlohmann::json& metadata() const { return *contents_.metadata; }
  // Every tensor, in the order written.
  const std::vector<NamedTensor>& tensors() const { return contents_.tensors; }
  // Errors: NOT_FOUND no tensor of that name.
  absl::StatusOr<const Tensor*> Get(const std::string& name) const;

  // What a reader that does not hold a whole model uses (the evaluator task, the tools on
  // a version-2 checkpoint opened without its tensors); they work on any checkpoint.
  // The shape of tensor `name`. Errors: NOT_FOUND no tensor of that name.
  absl::StatusOr<std::vector<int64_t>> Shape(const std::string& name) const;
  // Every tensor's name, in manifest order.
  std::vector<std::string> TensorNames() const;
  // Rows [row_begin, row_end) of tensor `name` into `out` (room for exactly those rows):
  // copied when the tensors are loaded, else read from the shard files block by block,
  // each block's CRC-32C verified first (ReadTensorRows; one block held at a time).
  // Errors: NOT_FOUND no such tensor; INVALID_ARGUMENT rows out of range; DATA_LOSS as
  //         ReadTensorRows.
  absl::Status ReadRows(const std::string& name, int64_t row_begin, int64_t row_end,
                        float* out) const;
  // The whole tensor `name` (ReadRows of every row). Errors: as ReadRows.
  absl::StatusOr<Tensor> ReadTensor(const std::string& name) const;
  // A version-2 checkpoint opened without its tensors: its parsed manifest (for a
  // ShardRowReader over a table); null otherwise.
  const ShardedManifest* sharded_manifest() const {
    return tensors_loaded_ ? nullptr : &manifest_;
  }

 private:
  CheckpointReader() = default;
  std::string path_;
  int version_ = 1;
  bool tensors_loaded_ = true;
  CheckpointContents contents_;
  std::map<std::string, size_t> index_;
  ShardedManifest manifest_;  // a version-2 checkpoint's, when its tensors are not loaded
};

// The checkpoint to restore from under `root`: the one `latest` names if it verifies;
// otherwise (reported in one LogError line naming it and why) the newest older
// "ckpt-<step>" that verifies. Without a `latest` file, the newest that verifies.
// Errors: NOT_FOUND root missing or holding no checkpoint; DATA_LOSS checkpoints exist but
//         none verifies (the message names the newest one's problem).
absl::StatusOr<std::string> FindLatestGoodCheckpoint(const std::string& root);

// The committed checkpoints under `root` as (step, folder name), newest first: folders
// named "ckpt-<digits>" only (a writer's temporary folder is renamed to that name only
// once complete), whether or not they verify; empty when `root` is missing.
std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& root);

// The directory name "ckpt-<step>".
std::string CheckpointName(int64_t step);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_CHECKPOINT_H_
