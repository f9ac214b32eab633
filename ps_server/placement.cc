#include "ps_server/placement.h"

#include <algorithm>
#include <numeric>
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

int NumShardsFor(const VariableShape& variable, int num_ps, const PlacementPolicy& policy) {
  const int64_t rows = RowsOf(variable.shape);
  // A rank-0 variable cannot be split; neither can one with no rows.
  if (variable.shape.empty() || rows <= 1) return 1;
  int64_t shards;
  if (policy.num_shards > 0) {
    shards = policy.num_shards;
  } else {
    const int64_t bytes = NumElements(variable.shape) * static_cast<int64_t>(sizeof(float));
    const int64_t max_shards = policy.max_shards > 0 ? policy.max_shards : num_ps;
    shards = std::min(max_shards, bytes / policy.min_shard_bytes);
  }
  return static_cast<int>(std::max<int64_t>(1, std::min(shards, rows)));
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

// Fills in the fields an entry written before partitioning existed lacks: it describes
// the whole variable.
VariablePlacementEntry Normalized(const VariablePlacementEntry& entry) {
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

}  // namespace

PlacementPolicy RoundRobinUnpartitioned() {
  PlacementPolicy policy;
  policy.strategy = PlacementStrategy::kRoundRobin;
  policy.num_shards = 0;
  policy.max_shards = 1;
  return policy;
}

absl::StatusOr<PlacementPolicy> PlacementPolicyFromJson(const nlohmann::json& value) {
  PlacementPolicy policy;
  if (value.is_null()) return policy;
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement must be an object, got ", value.dump()));
  }
  auto read_int = [&](const std::string& key, int64_t min, int64_t max,
                      int64_t* out) -> absl::Status {
    const nlohmann::json& v = value[key];
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      return absl::InvalidArgumentError(absl::StrCat("placement.", key,
                                                     " must be an integer >= ", min, ", got ",
                                                     v.dump()));
    }
    *out = v.get<int64_t>();
    return absl::OkStatus();
  };
  constexpr int64_t kMaxShards = 1 << 20;  // far beyond any sane split; keeps int safe
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& key = it.key();
    int64_t n = 0;
    absl::Status status;
    if (key == "strategy") {
      const std::string strategy = it->is_string() ? it->get<std::string>() : it->dump();
      if (strategy == "round_robin") {
        policy.strategy = PlacementStrategy::kRoundRobin;
      } else if (strategy == "size_balanced") {
        policy.strategy = PlacementStrategy::kSizeBalanced;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "placement.strategy must be \"round_robin\" or \"size_balanced\", got ",
            it->dump()));
      }
    } else if (key == "num_shards") {
      status = read_int(key, 0, kMaxShards, &n);
      policy.num_shards = static_cast<int>(n);
    } else if (key == "min_shard_bytes") {
      status = read_int(key, 1, int64_t{1} << 50, &n);
      policy.min_shard_bytes = n;
    } else if (key == "max_shards") {
      status = read_int(key, 1, kMaxShards, &n);
      policy.max_shards = static_cast<int>(n);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement has an unknown key \"", key,
          "\" (known: strategy, num_shards, min_shard_bytes, max_shards)"));
    }
    if (!status.ok()) return status;
  }
  return policy;
}

std::string DescribePolicy(const PlacementPolicy& policy) {
  std::string text =
      policy.strategy == PlacementStrategy::kRoundRobin ? "round_robin" : "size_balanced";
  if (policy.num_shards > 0) {
    absl::StrAppend(&text, ", num_shards ", policy.num_shards);
  } else {
    absl::StrAppend(&text, ", min_shard_bytes ", policy.min_shard_bytes, ", max_shards ",
                    policy.max_shards > 0 ? absl::StrCat(policy.max_shards)
                                          : std::string("= number of ps"));
  }
  return text;
}

absl::StatusOr<std::vector<VariablePlacementEntry>> PlaceVariables(
    const std::vector<VariableShape>& variables, int num_ps, const PlacementPolicy& policy) {
  if (num_ps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot place variables on ", num_ps, " ps tasks"));
  }
  if (policy.strategy != PlacementStrategy::kRoundRobin &&
      policy.strategy != PlacementStrategy::kSizeBalanced) {
    return absl::InvalidArgumentError("unknown placement strategy");
  }
  if (policy.num_shards < 0 || policy.max_shards < 0 || policy.min_shard_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad placement policy: num_shards ", policy.num_shards, ", max_shards ",
        policy.max_shards, ", min_shard_bytes ", policy.min_shard_bytes,
        " (need num_shards >= 0, max_shards >= 0, min_shard_bytes >= 1)"));
  }
  std::vector<VariablePlacementEntry> entries;
  absl::flat_hash_set<std::string> seen;
  for (const VariableShape& variable : variables) {
    if (variable.name.empty()) return absl::InvalidArgumentError("a variable has no name");
    if (!seen.insert(variable.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", variable.name, "\" is named twice"));
    }
    if (NumElements(variable.shape) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", variable.name, "\" has a bad shape ", ShapeToString(variable.shape)));
    }
    const int shards = NumShardsFor(variable, num_ps, policy);
    const int64_t rows = RowsOf(variable.shape);
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
  }

  if (policy.strategy == PlacementStrategy::kRoundRobin) {
    for (size_t i = 0; i < entries.size(); ++i) {
      entries[i].set_ps_index(static_cast<int>(i % num_ps));
    }
    return entries;
  }
  // Size-balanced: the greedy "largest first onto the least loaded" (LPT) rule, within
  // 4/3 of the best possible maximum load and deterministic, so a restarted chief
  // computes the same placement.
  std::vector<int64_t> bytes(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    bytes[i] = NumElements(ToVector(entries[i].shape())) * static_cast<int64_t>(sizeof(float));
  }
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<int64_t> load(num_ps, 0);
  for (size_t i : order) {
    const int ps = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    entries[i].set_ps_index(ps);
    load[ps] += bytes[i];
  }
  return entries;
}

absl::StatusOr<std::vector<VariablePlacementEntry>> PlaceRoundRobin(
    const std::vector<VariableShape>& variables, int num_ps) {
  return PlaceVariables(variables, num_ps, RoundRobinUnpartitioned());
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
    VariablePlacementEntry entry = Normalized(raw);
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
