#include "ps_server/checkpoint_shards.h"

#include <sys/stat.h>

#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/finite.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

constexpr char kSlotInfix[] = "/optimizer/";
constexpr size_t kMaxRank = 8;
constexpr int kMaxPsIndex = 99999;

// The shape of `slice`'s shard: its rows of the variable.
std::vector<int64_t> ShardShape(const ShardSlice& slice) {
  if (slice.variable_shape.empty()) return {};
  std::vector<int64_t> shape = slice.variable_shape;
  shape[0] = slice.row_end - slice.row_begin;
  return shape;
}

absl::Status CheckSlice(const ShardSlice& slice) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint slice of shard \"", slice.shard,
                                                   "\": ", why));
  };
  if (slice.shard.empty() || slice.variable.empty()) return bad("no shard or variable name");
  if (slice.variable_shape.size() > kMaxRank) return bad("more than 8 dimensions");
  for (int64_t d : slice.variable_shape) {
    if (d < 1) return bad("a dimension below 1");
  }
  const int64_t elements = NumElements(slice.variable_shape);
  if (elements < 0 || elements > kMaxTensorElements) return bad("too many elements");
  if (slice.row_begin < 0 || slice.row_end <= slice.row_begin ||
      slice.row_end > RowsOf(slice.variable_shape)) {
    return bad(absl::StrCat("rows [", slice.row_begin, ", ", slice.row_end,
                            ") are not rows of a variable of shape ",
                            ShapeToString(slice.variable_shape)));
  }
  return absl::OkStatus();
}

}  // namespace

CheckpointShards::CheckpointShards(VariableStore* store, std::string root, Options options)
    : store_(store), root_(std::move(root)), options_(options) {}

absl::StatusOr<std::string> CheckpointShards::Folder(const std::string& checkpoint,
                                                     bool committed) const {
  if (committed ? !IsCommittedCheckpointName(checkpoint) : !IsTempCheckpointName(checkpoint)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", absl::CHexEscape(checkpoint.substr(0, 64)), "\" is not the name of a ",
        committed ? "checkpoint folder (ckpt-<step>)"
                  : "temporary checkpoint folder (.tmp-ckpt-<step>-<pid>-<n>)"));
  }
  const std::string folder = absl::StrCat(root_, "/", checkpoint);
  struct stat st;
  if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this ps sees no folder ", checkpoint, " in its --checkpoint_dir ", root_,
        ": it is not the chief's checkpoint folder (not shared?)"));
  }
  return folder;
}

absl::Status CheckpointShards::CheckSlices(const std::vector<ShardSlice>& slices) const {
  // A ps may hold several shards of one variable (more shards than ps): each its rows.
  std::set<std::string> shards;
  for (const ShardSlice& slice : slices) {
    PS_RETURN_IF_ERROR(CheckSlice(slice));
    if (!shards.insert(slice.shard).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard \"", slice.shard, "\" named twice"));
    }
    PS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, store_->ShapeOf(slice.shard));
    if (shape != ShardShape(slice)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard \"", slice.shard, "\" is ", ShapeToString(shape), " here, not rows [",
          slice.row_begin, ", ", slice.row_end, ") of ", ShapeToString(slice.variable_shape)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardFile> CheckpointShards::Write(const std::string& checkpoint, int ps_index,
                                                  const std::vector<ShardSlice>& slices) const {
  if (ps_index < 0 || ps_index > kMaxPsIndex) {
    return absl::InvalidArgumentError(absl::StrCat("ps index ", ps_index, " out of range"));
  }
  PS_ASSIGN_OR_RETURN(std::string folder, Folder(checkpoint, /*committed=*/false));
  PS_RETURN_IF_ERROR(CheckSlices(slices));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ShardFileWriter> writer,
                      ShardFileWriter::Create(folder, ShardFileName(ps_index),
                                              options_.block_bytes));
  std::vector<ShardCounts> counts;
  for (const ShardSlice& slice : slices) {
    // One shard's state at a time, written from the variable itself under its lock: a
    // copy of a large table's rows and slots would double this ps's peak memory (it did:
    // about twice its rows in the 4,000,000-row run). Updates of this shard wait for the
    // write: none are under way in a consistent checkpoint (the chief's default); a live
    // one (--consistent_checkpoints=false) pauses this shard's pushes for its write.
    ShardCounts c;
    c.variable = slice.variable;
    PS_RETURN_IF_ERROR(store_->VisitState(
        slice.shard, [&](const VariableStore::StateView& s) -> absl::Status {
          PS_RETURN_IF_ERROR(writer->Add(slice.variable, slice.variable_shape, slice.row_begin,
                                         slice.row_end, s.value));
          c.iterations = s.iterations;
          c.version = s.version;
          for (const auto& [slot_name, slot] : s.slots) {
            PS_RETURN_IF_ERROR(writer->Add(absl::StrCat(slice.variable, kSlotInfix, slot_name),
                                           slice.variable_shape, slice.row_begin,
                                           slice.row_end, slot));
            c.slots.push_back(slot_name);
          }
          return absl::OkStatus();
        }));
    counts.push_back(std::move(c));
  }
  if (options_.delay_before_sync > absl::ZeroDuration()) absl::SleepFor(options_.delay_before_sync);
  return writer->Finish(std::move(counts));
}

namespace {

// `metadata.variables[variable]`'s count `key` (0 when absent).
absl::StatusOr<int64_t> CountOf(const nlohmann::json& entry, const char* key,
                                const std::string& dir, const std::string& variable) {
  if (!entry.contains(key)) return 0;
  if (!entry[key].is_number_integer() || entry[key].get<int64_t>() < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", dir, ": ", key, " of ", variable,
                                            " is not a count"));
  }
  return entry[key].get<int64_t>();
}

}  // namespace

absl::Status CheckpointShards::Restore(const std::string& checkpoint,
                                       const std::vector<ShardSlice>& slices) const {
  PS_ASSIGN_OR_RETURN(std::string folder, Folder(checkpoint, /*committed=*/true));
  PS_RETURN_IF_ERROR(CheckSlices(slices));
  nlohmann::json header;
  PS_ASSIGN_OR_RETURN(const ShardedManifest manifest, ReadShardedManifest(folder, &header));
  const nlohmann::json* variables = nullptr;
  if (header.contains("metadata") && header["metadata"].is_object() &&
      header["metadata"].contains("variables") && header["metadata"]["variables"].is_object()) {
    variables = &header["metadata"]["variables"];
  }
  // The checkpoint's tensor `tensor_name`, of the slice's variable's shape.
  const auto stored_tensor = [&](const std::string& tensor_name,
                                 const ShardSlice& slice) -> absl::StatusOr<const StoredTensor*> {
    auto it = manifest.index.find(tensor_name);
    if (it == manifest.index.end()) {
      return absl::NotFoundError(absl::StrCat("checkpoint ", folder, " has no tensor \"",
                                              tensor_name, "\""));
    }
    const StoredTensor& stored = manifest.tensors[it->second];
    if (stored.shape != slice.variable_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", folder, ": tensor \"", tensor_name, "\" is ",
          ShapeToString(stored.shape), ", the variable here ",
          ShapeToString(slice.variable_shape)));
    }
    return &stored;
  };
  // What each shard restores: its counts, and the tensors (value, then slots) it reads.
  std::vector<VariableStore::InPlaceRestore> restores;
  std::vector<std::vector<const StoredTensor*>> sources;
  for (const ShardSlice& slice : slices) {
    const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json& entry =
        variables != nullptr && variables->contains(slice.variable) &&
                (*variables)[slice.variable].is_object()
            ? (*variables)[slice.variable]
            : empty;
    VariableStore::InPlaceRestore r;
    r.name = slice.shard;
    PS_ASSIGN_OR_RETURN(r.iterations, CountOf(entry, "iterations", folder, slice.variable));
    PS_ASSIGN_OR_RETURN(r.version, CountOf(entry, "version", folder, slice.variable));
    std::vector<const StoredTensor*> tensors;
    PS_ASSIGN_OR_RETURN(tensors.emplace_back(), stored_tensor(slice.variable, slice));
    if (entry.contains("slots")) {
      if (!entry["slots"].is_array() || entry["slots"].size() > 16) {
        return absl::DataLossError(absl::StrCat("checkpoint ", folder, ": slots of ",
                                                slice.variable, " is not a short list"));
      }
      for (const nlohmann::json& slot : entry["slots"]) {
        if (!slot.is_string()) {
          return absl::DataLossError(absl::StrCat("checkpoint ", folder, ": a slot name of ",
                                                  slice.variable, " is not a string"));
        }
        r.slots.push_back(slot.get<std::string>());
        PS_ASSIGN_OR_RETURN(
            tensors.emplace_back(),
            stored_tensor(absl::StrCat(slice.variable, kSlotInfix, r.slots.back()), slice));
      }
    }
    restores.push_back(std::move(r));
    sources.push_back(std::move(tensors));
  }
  // Every block this restore will read, read once first: its checksum and every value
  // finite, one block held at a time. Only then does the store change, each variable
  // written in place (a second copy of a shard could be most of this ps's memory).
  for (size_t i = 0; i < slices.size(); ++i) {
    for (size_t k = 0; k < sources[i].size(); ++k) {
      const std::string what = k == 0 ? absl::StrCat("restored value of \"", restores[i].name, "\"")
                                      : absl::StrCat("slot \"", restores[i].slots[k - 1],
                                                     "\" of \"", restores[i].name, "\"");
      PS_RETURN_IF_ERROR(VisitTensorRows(
          folder, manifest, *sources[i][k], slices[i].row_begin, slices[i].row_end,
          [&](int64_t first_row, absl::Span<const float> rows) -> absl::Status {
            const int64_t at = FirstNonFinite(rows);
            if (at < 0) return absl::OkStatus();
            return absl::InvalidArgumentError(absl::StrCat(
                what, " in checkpoint ", folder, " holds a non-finite value (",
                DescribeFloat(rows[at]), ") at element ", at, " of its rows from ", first_row));
          }));
    }
  }
  for (size_t i = 0; i < slices.size(); ++i) {
    restores[i].fill = [&, i](absl::Span<const absl::Span<float>> targets) -> absl::Status {
      for (size_t k = 0; k < targets.size(); ++k) {
        if (static_cast<int64_t>(targets[k].size()) != NumElements(ShardShape(slices[i]))) {
          return absl::InternalError(absl::StrCat(restores[i].name, " holds ", targets[k].size(),
                                                  " values, its slice ",
                                                  NumElements(ShardShape(slices[i]))));
        }
        PS_RETURN_IF_ERROR(ReadTensorRows(folder, manifest, *sources[i][k], slices[i].row_begin,
                                          slices[i].row_end, targets[k].data()));
      }
      return absl::OkStatus();
    };
  }
  return store_->RestoreInPlace(restores);
}

}  // namespace pstrain
