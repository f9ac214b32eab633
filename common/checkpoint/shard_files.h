#ifndef PSTRAIN_COMMON_CHECKPOINT_SHARD_FILES_H_
#define PSTRAIN_COMMON_CHECKPOINT_SHARD_FILES_H_

// Checkpoint format v2's parts (common/checkpoint/checkpoint.h describes the folder): the
// shard files each ps writes of its own rows, and the manifest entries that say which
// file holds which rows of which tensor. A tensor's "rows" are its slices along the first
// axis (a rank-0 tensor is one row), as common/sharding cuts variables.
//
// A shard file is a sequence of blocks, each the bytes (float32 little-endian, row-major)
// of whole rows of one tensor, at most kShardBlockBytes each (or one row, when a row is
// larger), each with its own CRC-32C: a reader reads, verifies and copies one block at a
// time and only the blocks that hold rows it wants, so neither side ever holds a whole
// variable for a checkpoint.
//
// Everything read back is untrusted: ParseShardedManifest checks every count without
// overflow and that each tensor's pieces cover its rows exactly once, and ReadTensorRows
// checks the file's length and each block's CRC before a byte is used.
//
// Thread-safety: pure functions, and a ShardFileWriter used by one thread.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/checkpoint/durable_file.h"
#include "common/tensor.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

// The largest block a writer makes (unless one row is larger): the bound on what a
// writer or reader buffers at once.
inline constexpr int64_t kShardBlockBytes = int64_t{16} << 20;

// One block: `length` bytes at `offset` of its file, rows [row_begin, row_end) of its
// tensor, with their CRC-32C.
struct ShardBlock {
  int64_t offset = 0;
  int64_t length = 0;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  uint32_t crc32c = 0;
};

// Rows [row_begin, row_end) of one checkpoint tensor ("<variable>" or
// "<variable>/optimizer/<slot>", whose whole shape is `shape`), as one file holds them.
struct ShardPiece {
  std::string tensor;
  std::vector<int64_t> shape;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  std::vector<ShardBlock> blocks;
};

// A ps's counts for one of its shards, which the chief folds into the manifest's metadata
// (common/training/training_state.h: "iterations", "version", "slots" per variable).
struct ShardCounts {
  std::string variable;
  int64_t iterations = 0;
  int64_t version = 0;
  std::vector<std::string> slots;
};

// One shard file as its writer reports it: its name in the checkpoint folder, length and
// CRC-32C of the whole file, the pieces it holds, and the counts of its shards.
struct ShardFile {
  std::string name;
  int64_t length = 0;
  uint32_t crc32c = 0;
  std::vector<ShardPiece> pieces;
  std::vector<ShardCounts> counts;
};

// A ps's shard as the chief places it: the shard's name on the ps ("emb/part_1"), the
// model variable it belongs to, that variable's whole shape, and the rows it covers.
struct ShardSlice {
  std::string shard;
  std::string variable;
  std::vector<int64_t> variable_shape;
  int64_t row_begin = 0;
  int64_t row_end = 0;
};

// Rows of a tensor of `shape` (1 for a rank-0 one) and the elements in one row.
int64_t RowsOf(const std::vector<int64_t>& shape);
int64_t RowElements(const std::vector<int64_t>& shape);

// Whether `name` is a committed checkpoint folder's name ("ckpt-<digits>") or a writer's
// temporary folder's (".tmp-ckpt-<digits>-<digits>-<digits>"): what a ps accepts as the
// folder of a checkpoint RPC (no '/', no "..", nothing else).
bool IsCommittedCheckpointName(absl::string_view name);
bool IsTempCheckpointName(absl::string_view name);

// The shard file ps `ps_index` writes: "shard-<5 digits>".
std::string ShardFileName(int ps_index);

// Writes one shard file, block by block. Not thread-safe.
class ShardFileWriter {
 public:
  // Creates (or truncates) `dir`/`name`; `dir` must exist. A symbolic link at the path is
  // refused (O_NOFOLLOW). Errors: INTERNAL naming the file and errno's text.
  static absl::StatusOr<std::unique_ptr<ShardFileWriter>> Create(
      const std::string& dir, const std::string& name, int64_t block_bytes = kShardBlockBytes);

  // Appends rows [row_begin, row_end) of tensor `tensor` (whole shape `shape`), whose
  // values are `rows` (that many rows, row-major).
  // Errors: INVALID_ARGUMENT `rows` does not hold those rows; INTERNAL a failed write.
  absl::Status Add(const std::string& tensor, const std::vector<int64_t>& shape,
                   int64_t row_begin, int64_t row_end, const Tensor& rows);
  // The same from values borrowed in place (a ps's variable under its lock: no copy).
  absl::Status Add(const std::string& tensor, const std::vector<int64_t>& shape,
                   int64_t row_begin, int64_t row_end, absl::Span<const float> rows);

  // Fsyncs and closes the file, then fsyncs its folder. `counts` are passed through.
  // Errors: INTERNAL naming the file.
  absl::StatusOr<ShardFile> Finish(std::vector<ShardCounts> counts);

 private:
  ShardFileWriter(std::string dir, std::string name, int fd, int64_t block_bytes);

  const std::string dir_;
  const std::string path_;
  FileDescriptor fd_;
  const int64_t block_bytes_;
  ShardFile file_;
};

// The stored rows of one tensor, pieces sorted by rows and covering every row once.
struct StoredTensor {
  struct Piece {
    std::string file;
    int64_t row_begin = 0;
    int64_t row_end = 0;
    std::vector<ShardBlock> blocks;  // sorted, covering the piece's rows once
  };
  std::string name;
  std::vector<int64_t> shape;
  std::vector<Piece> pieces;
};

// The parts of a version-2 manifest that locate tensors.
struct ShardedManifest {
  std::map<std::string, int64_t> file_lengths;  // by file name
  std::map<std::string, uint32_t> file_crcs;
  std::vector<StoredTensor> tensors;            // in manifest order
  std::map<std::string, size_t> index;          // tensor name -> position in `tensors`
};

// The manifest's "files" and "tensors" entries for `files` (the chief adds the header).
// Pieces of one tensor from several files are merged into one entry, sorted by rows.
void AddShardFilesToManifest(const std::vector<ShardFile>& files, nlohmann::json* manifest);

// Parses and checks "files" and "tensors" of a version-2 manifest of folder `dir` (named
// in errors). Errors: DATA_LOSS anything malformed: a bad file name, a count out of
// range, a block whose length does not match its rows or lies past its file's length,
// pieces or blocks that overlap, leave a gap or pass the tensor's rows.
absl::StatusOr<ShardedManifest> ParseShardedManifest(const nlohmann::json& manifest,
                                                     const std::string& dir);

// Reads the whole manifest.json of `dir` and parses it as version 2; the whole parsed
// manifest (its header fields too) goes to `json` unless it is null (a pointer, not a
// member of the result, so that this header needs only json_fwd.hpp). Errors: DATA_LOSS
// missing, too large, not JSON, not a pstrain manifest, a version other than 2
// ("unsupported checkpoint format version N"), or as ParseShardedManifest.
absl::StatusOr<ShardedManifest> ReadShardedManifest(const std::string& dir,
                                                    nlohmann::json* json = nullptr);

// Reads rows [row_begin, row_end) of `tensor` from its files in `dir` into `out` (room for
// exactly those rows), one block at a time, each block's CRC-32C verified before it is
// copied. Checks each file's length against the manifest's.
// Errors: INVALID_ARGUMENT rows out of range; DATA_LOSS a missing, short or long file, a
// failed read, a CRC mismatch (naming the file and tensor).
absl::Status ReadTensorRows(const std::string& dir, const ShardedManifest& manifest,
                            const StoredTensor& tensor, int64_t row_begin, int64_t row_end,
                            float* out);

// The same reads and checks, handing each verified block's rows within [row_begin,
// row_end) to `visit` (the index of the first, and their floats) instead of copying them:
// a caller can check rows without holding them (a restore that verifies every block
// before it writes anything). Errors: ReadTensorRows's, or `visit`'s (the walk stops).
absl::Status VisitTensorRows(
    const std::string& dir, const ShardedManifest& manifest, const StoredTensor& tensor,
    int64_t row_begin, int64_t row_end,
    absl::FunctionRef<absl::Status(int64_t first_row, absl::Span<const float> rows)> visit);

// Single rows of one tensor of a committed version-2 checkpoint, read from its shard files
// a few at a time: an Embedding table's rows for one validation batch (the evaluator task,
// tools/evaluate), never the whole table. The format checksums whole blocks (up to 16
// MiB), so a row cannot be verified by itself: Open verifies every block of the tensor
// once, streaming each through a buffer of at most kVerifyChunkBytes, and keeps the files
// open; ReadRows then seeks to each row (pread) and reads only its bytes. A committed
// checkpoint's files are never written again, and the descriptors held keep them readable
// when the chief prunes the checkpoint meanwhile.
//
// Thread-safety: immutable after Open; ReadRows may be called from any thread.
class ShardRowReader {
 public:
  // The buffer Open verifies blocks through.
  static constexpr int64_t kVerifyChunkBytes = int64_t{1} << 20;

  // Opens and verifies tensor `tensor` of the checkpoint in `dir` whose parsed manifest is
  // `manifest` (ReadShardedManifest). Errors: NOT_FOUND no such tensor; DATA_LOSS a
  // missing, short or long file, a failed read, a block that fails its CRC-32C (naming the
  // file and the tensor).
  static absl::StatusOr<std::unique_ptr<ShardRowReader>> Open(const std::string& dir,
                                                              const ShardedManifest& manifest,
                                                              const std::string& tensor);

  // Rows `rows` (any order, repeats allowed) into `out`, row i at out + i * row elements.
  // Errors: INVALID_ARGUMENT a row out of range; DATA_LOSS a failed read.
  absl::Status ReadRows(absl::Span<const int64_t> rows, float* out) const;

  const std::vector<int64_t>& shape() const { return tensor_.shape; }

 private:
  ShardRowReader(std::string dir, StoredTensor tensor) : dir_(std::move(dir)), tensor_(std::move(tensor)) {}

  const std::string dir_;
  const StoredTensor tensor_;
  // One open file per piece of tensor_, in the same order.
  std::vector<std::unique_ptr<FileDescriptor>> files_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_SHARD_FILES_H_
