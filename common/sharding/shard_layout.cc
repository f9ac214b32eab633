#include "common/sharding/shard_layout.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// A rank-0 variable is one row of one element, so the row arithmetic below needs no
// special case for scalars.
int64_t RowsOf(absl::Span<const int64_t> shape) { return shape.empty() ? 1 : shape[0]; }

int64_t RowElements(absl::Span<const int64_t> shape) {
  return shape.empty() ? 1 : NumElements(shape.subspan(1));
}

std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& field) {
  return std::vector<int64_t>(field.begin(), field.end());
}

absl::Status CheckShardFits(absl::Span<const int64_t> full_shape,
                            const VariablePlacementEntry& shard) {
  const int64_t rows = RowsOf(full_shape);
  if (shard.row_offset() < 0 || shard.num_rows() < 0 ||
      shard.row_offset() + shard.num_rows() > rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard \"", shard.name(), "\" covers rows [", shard.row_offset(), ", ",
        shard.row_offset() + shard.num_rows(), ") of a variable with ", rows, " rows"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<VariablePlacementEntry> SplitIntoShards(const VariableShape& variable,
                                                    int num_shards) {
  const int64_t rows = RowsOf(variable.shape);
  // A rank-0 variable cannot be split; neither can one with no rows.
  const int shards = variable.shape.empty() || rows <= 1
                         ? 1
                         : static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_shards, rows)));
  std::vector<VariablePlacementEntry> entries;
  int64_t offset = 0;
  for (int s = 0; s < shards; ++s) {
    const int64_t shard_rows = rows / shards + (s < rows % shards ? 1 : 0);
    VariablePlacementEntry entry;
    entry.set_name(shards == 1 ? variable.name : absl::StrCat(variable.name, "/part_", s));
    entry.set_variable_name(variable.name);
    entry.set_row_offset(offset);
    entry.set_num_rows(shard_rows);
    entry.set_shard_index(s);
    entry.set_num_shards(shards);
    for (size_t d = 0; d < variable.shape.size(); ++d) {
      entry.add_full_shape(variable.shape[d]);
      entry.add_shape(d == 0 ? shard_rows : variable.shape[d]);
    }
    offset += shard_rows;
    entries.push_back(std::move(entry));
  }
  return entries;
}

VariablePlacementEntry NormalizedEntry(const VariablePlacementEntry& entry) {
  if (!entry.variable_name().empty()) return entry;
  VariablePlacementEntry out = entry;
  out.set_variable_name(entry.name());
  *out.mutable_full_shape() = entry.shape();
  out.set_row_offset(0);
  out.set_num_rows(RowsOf(ToVector(entry.shape())));
  out.set_shard_index(0);
  out.set_num_shards(1);
  return out;
}

absl::StatusOr<std::vector<VariableLayout>> ResolveLayout(
    const std::vector<VariableShape>& variables,
    absl::Span<const VariablePlacementEntry> placement, int num_ps) {
  absl::flat_hash_map<std::string, size_t> index;
  std::vector<VariableLayout> layout(variables.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    index[variables[i].name] = i;
    layout[i].name = variables[i].name;
    layout[i].shape = variables[i].shape;
  }
  absl::flat_hash_set<std::string> shard_names;
  for (const VariablePlacementEntry& raw : placement) {
    VariablePlacementEntry entry = NormalizedEntry(raw);
    auto it = index.find(entry.variable_name());
    if (it == index.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the placement names variable \"", entry.variable_name(), "\" the model lacks"));
    }
    VariableLayout& v = layout[it->second];
    if (!shard_names.insert(entry.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard \"", entry.name(), "\" is placed twice"));
    }
    if (ToVector(entry.full_shape()) != v.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", v.name, "\" is placed with shape ",
          ShapeToString(ToVector(entry.full_shape())), " but the model has ",
          ShapeToString(v.shape)));
    }
    if (absl::Status fits = CheckShardFits(v.shape, entry); !fits.ok()) return fits;
    std::vector<int64_t> expected = v.shape;
    if (!expected.empty()) expected[0] = entry.num_rows();
    if (ToVector(entry.shape()) != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard \"", entry.name(), "\" has shape ", ShapeToString(ToVector(entry.shape())),
          " but its rows of variable \"", v.name, "\" have ", ShapeToString(expected)));
    }
    if (entry.ps_index() < 0 || entry.ps_index() >= num_ps) {
      return absl::InvalidArgumentError(absl::StrCat("shard \"", entry.name(),
                                                     "\" is placed on ps ", entry.ps_index(),
                                                     " of ", num_ps));
    }
    v.shards.push_back(std::move(entry));
  }
  for (VariableLayout& v : layout) {
    if (v.shards.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", v.name, "\" has no placement on any ps"));
    }
    std::sort(v.shards.begin(), v.shards.end(),
              [](const VariablePlacementEntry& a, const VariablePlacementEntry& b) {
                return a.row_offset() < b.row_offset();
              });
    int64_t next = 0;
    for (const VariablePlacementEntry& shard : v.shards) {
      if (shard.row_offset() != next) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the shards of variable \"", v.name, "\" do not cover row ", next,
            " exactly once"));
      }
      next += shard.num_rows();
    }
    if (next != RowsOf(v.shape)) {
      return absl::InvalidArgumentError(absl::StrCat("the shards of variable \"", v.name,
                                                     "\" cover ", next, " of ",
                                                     RowsOf(v.shape), " rows"));
    }
  }
  return layout;
}

absl::StatusOr<Tensor> SliceShard(const Tensor& full, const VariablePlacementEntry& shard) {
  if (full.shape() != ToVector(shard.full_shape())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot slice shard \"", shard.name(), "\" from a tensor of shape ",
        full.ShapeString(), " (expected ", ShapeToString(ToVector(shard.full_shape())), ")"));
  }
  if (absl::Status fits = CheckShardFits(full.shape(), shard); !fits.ok()) return fits;
  const int64_t row = RowElements(full.shape());
  const float* begin = full.data() + shard.row_offset() * row;
  return Tensor(ToVector(shard.shape()),
                std::vector<float>(begin, begin + shard.num_rows() * row));
}

absl::Status CopyShardInto(const Tensor& shard_value, const VariablePlacementEntry& shard,
                           Tensor* full) {
  if (full->shape() != ToVector(shard.full_shape()) ||
      shard_value.shape() != ToVector(shard.shape())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard \"", shard.name(), "\" of shape ", shard_value.ShapeString(),
        " does not fit its entry (shard ", ShapeToString(ToVector(shard.shape())), " of ",
        ShapeToString(ToVector(shard.full_shape())), ") into a tensor of shape ",
        full->ShapeString()));
  }
  if (absl::Status fits = CheckShardFits(full->shape(), shard); !fits.ok()) return fits;
  const int64_t row = RowElements(full->shape());
  std::copy(shard_value.data(), shard_value.data() + shard_value.num_elements(),
            full->data() + shard.row_offset() * row);
  return absl::OkStatus();
}

}  // namespace pstrain
