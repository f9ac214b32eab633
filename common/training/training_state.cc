#include "common/training/training_state.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

constexpr absl::string_view kSlotInfix = "/optimizer/";

// The checkpoint tensor name of a variable's optimizer slot.
std::string SlotTensorName(const std::string& variable, const std::string& slot) {
  return absl::StrCat(variable, kSlotInfix, slot);
}

absl::StatusOr<Tensor> TensorNamed(const CheckpointReader& reader, const std::string& name) {
  absl::StatusOr<const Tensor*> t = reader.Get(name);
  if (!t.ok()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", reader.path(), " lists tensor ", name, " but does not hold it"));
  }
  return **t;
}

absl::Status Malformed(const CheckpointReader& reader, const std::string& what) {
  return absl::DataLossError(absl::StrCat("checkpoint ", reader.path(), ": ", what));
}

// A variable as the metadata's "variables" entry `entry` describes it.
absl::StatusOr<VariableSnapshot> ListedVariable(const CheckpointReader& reader,
                                                const std::string& name,
                                                const nlohmann::json& entry) {
  if (!entry.is_object()) {
    return Malformed(reader, absl::StrCat("metadata.variables.", name, " is not an object"));
  }
  VariableSnapshot v;
  v.name = name;
  PS_ASSIGN_OR_RETURN(v.value, TensorNamed(reader, name));
  for (auto [key, field] : {std::pair<const char*, int64_t*>{"iterations", &v.iterations},
                            {"version", &v.version}}) {
    if (!entry.contains(key)) continue;
    if (!entry[key].is_number_integer()) {
      return Malformed(reader, absl::StrCat(key, " of ", name, " is not an integer"));
    }
    *field = entry[key].get<int64_t>();
  }
  if (!entry.contains("slots")) return v;
  if (!entry["slots"].is_array()) {
    return Malformed(reader, absl::StrCat("slots of ", name, " is not a list"));
  }
  for (const nlohmann::json& slot : entry["slots"]) {
    if (!slot.is_string()) {
      return Malformed(reader, absl::StrCat("a slot name of ", name, " is not a string"));
    }
    PS_ASSIGN_OR_RETURN(Tensor t, TensorNamed(reader, SlotTensorName(name, slot.get<std::string>())));
    v.slots.push_back({slot.get<std::string>(), std::move(t)});
  }
  return v;
}

}  // namespace

CheckpointContents CheckpointFromTrainingState(
    const TrainingState& state, const JobSpec& job, const nlohmann::json& extra_metadata,
    const std::vector<std::pair<std::string, int>>& num_shards) {
  const std::map<std::string, int> shards_of(num_shards.begin(), num_shards.end());
  CheckpointContents contents;
  contents.step = state.global_step;
  contents.epoch = state.epochs_done;
  *contents.job_spec =
      nlohmann::json::parse(SerializeJobSpec(job), nullptr, /*allow_exceptions=*/false);
  *contents.metadata = extra_metadata.is_object() ? extra_metadata : nlohmann::json::object();
  (*contents.metadata)["global_step"] = state.global_step;
  (*contents.metadata)["epochs_done"] = state.epochs_done;
  (*contents.metadata)["optimizer"] = job.optimizer.name();
  nlohmann::json variables = nlohmann::json::object();
  for (const VariableSnapshot& v : state.variables) {
    nlohmann::json slot_names = nlohmann::json::array();
    for (const NamedTensor& slot : v.slots) slot_names.push_back(slot.name);
    auto shards = shards_of.find(v.name);
    variables[v.name] = {{"shape", v.value.shape()},
                         {"iterations", v.iterations},
                         {"version", v.version},
                         {"slots", std::move(slot_names)},
                         {"num_shards", shards == shards_of.end() ? 1 : shards->second}};
    contents.tensors.push_back({v.name, v.value});
    for (const NamedTensor& slot : v.slots) {
      contents.tensors.push_back({SlotTensorName(v.name, slot.name), slot.tensor});
    }
  }
  (*contents.metadata)["variables"] = std::move(variables);
  return contents;
}

CheckpointContents ShardedCheckpointHeader(int epochs_done, int64_t global_step,
                                           const JobSpec& job,
                                           const nlohmann::json& extra_metadata,
                                           const std::vector<ShardedVariableInfo>& variables,
                                           const std::vector<ShardFile>& files) {
  struct Counts {
    int64_t iterations = 0;
    int64_t version = 0;
    bool seen = false;
    std::vector<std::string> slots;
  };
  std::map<std::string, Counts> counts;
  for (const ShardFile& file : files) {
    for (const ShardCounts& c : file.counts) {
      Counts& into = counts[c.variable];
      into.iterations = std::max(into.iterations, c.iterations);
      into.version = std::max(into.version, c.version);
      if (!into.seen) into.slots = c.slots;
      into.seen = true;
    }
  }
  CheckpointContents contents;
  contents.step = global_step;
  contents.epoch = epochs_done;
  *contents.job_spec =
      nlohmann::json::parse(SerializeJobSpec(job), nullptr, /*allow_exceptions=*/false);
  *contents.metadata = extra_metadata.is_object() ? extra_metadata : nlohmann::json::object();
  (*contents.metadata)["global_step"] = global_step;
  (*contents.metadata)["epochs_done"] = epochs_done;
  (*contents.metadata)["optimizer"] = job.optimizer.name();
  nlohmann::json entries = nlohmann::json::object();
  for (const ShardedVariableInfo& v : variables) {
    const Counts& c = counts[v.name];
    entries[v.name] = {{"shape", v.shape},
                       {"iterations", c.iterations},
                       {"version", c.version},
                       {"slots", c.slots},
                       {"num_shards", v.num_shards}};
  }
  (*contents.metadata)["variables"] = std::move(entries);
  return contents;
}

absl::StatusOr<TrainingState> TrainingStateFromCheckpoint(const CheckpointReader& reader) {
  TrainingState state;
  state.epochs_done = reader.epoch();
  state.global_step = reader.step();
  const nlohmann::json& metadata = reader.metadata();
  if (metadata.is_object() && metadata.contains("variables")) {
    const nlohmann::json& variables = metadata["variables"];
    if (!variables.is_object()) return Malformed(reader, "metadata.variables is not an object");
    for (const auto& [name, entry] : variables.items()) {
      PS_ASSIGN_OR_RETURN(VariableSnapshot v, ListedVariable(reader, name, entry));
      state.variables.push_back(std::move(v));
    }
    return state;
  }
  // No metadata: infer variables and slots from the tensor names alone.
  for (const NamedTensor& t : reader.tensors()) {
    if (absl::StrContains(t.name, kSlotInfix)) continue;
    VariableSnapshot v;
    v.name = t.name;
    v.value = t.tensor;
    v.iterations = reader.step();
    const std::string prefix = absl::StrCat(t.name, kSlotInfix);
    for (const NamedTensor& s : reader.tensors()) {
      if (absl::StartsWith(s.name, prefix)) {
        v.slots.push_back({s.name.substr(prefix.size()), s.tensor});
      }
    }
    state.variables.push_back(std::move(v));
  }
  return state;
}

absl::StatusOr<std::vector<VariableSnapshot>> VariablesForModel(
    const TrainingState& state, const std::vector<VariableSpec>& model,
    const std::string& source) {
  const std::string prefix = absl::StrCat(source, " does not fit the model: ");
  if (state.epochs_done < 0 || state.global_step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "negative epoch or step"));
  }
  std::map<std::string, const VariableSnapshot*> by_name;
  for (const VariableSnapshot& v : state.variables) by_name[v.name] = &v;
  std::vector<VariableSnapshot> ordered;
  ordered.reserve(model.size());
  for (const VariableSpec& spec : model) {
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "no variable ", spec.name));
    }
    const VariableSnapshot& v = *it->second;
    if (v.value.shape() != spec.shape) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, v.name, " is ", v.value.ShapeString(),
                                                     " there, ", ShapeToString(spec.shape),
                                                     " in the model"));
    }
    if (v.iterations < 0 || v.version < 0) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, v.name, " has negative counts"));
    }
    for (const NamedTensor& slot : v.slots) {
      if (slot.tensor.shape() != spec.shape) {
        return absl::InvalidArgumentError(absl::StrCat(prefix, "slot ", slot.name, " of ", v.name,
                                                       " is ", slot.tensor.ShapeString()));
      }
    }
    ordered.push_back(v);
  }
  return ordered;
}

}  // namespace pstrain
