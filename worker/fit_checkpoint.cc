#include "worker/fit_checkpoint.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr absl::string_view kSlotInfix = "/optimizer/";

// The name chief/coordinator.cc gives a variable's optimizer slot.
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

}  // namespace

CheckpointContents CheckpointFromTrainingState(const TrainingState& state, const JobSpec& job,
                                               const nlohmann::json& extra_metadata) {
  CheckpointContents contents;
  contents.step = state.global_step;
  contents.epoch = state.epochs_done;
  contents.job_spec =
      nlohmann::json::parse(SerializeJobSpec(job), nullptr, /*allow_exceptions=*/false);
  contents.metadata = extra_metadata.is_object() ? extra_metadata : nlohmann::json::object();
  contents.metadata["global_step"] = state.global_step;
  contents.metadata["epochs_done"] = state.epochs_done;
  contents.metadata["optimizer"] = job.optimizer.name();
  nlohmann::json variables = nlohmann::json::object();
  for (const FitVariableState& v : state.variables) {
    nlohmann::json slot_names = nlohmann::json::array();
    for (const NamedTensor& slot : v.slots) slot_names.push_back(slot.name);
    // "version" counts a ps variable's updates; here every step updates every variable.
    variables[v.name] = {{"shape", v.value.shape()},
                         {"iterations", v.iterations},
                         {"version", v.iterations},
                         {"slots", std::move(slot_names)},
                         {"num_shards", 1}};
    contents.tensors.push_back({v.name, v.value});
    for (const NamedTensor& slot : v.slots) {
      contents.tensors.push_back({SlotTensorName(v.name, slot.name), slot.tensor});
    }
  }
  contents.metadata["variables"] = std::move(variables);
  return contents;
}

absl::StatusOr<TrainingState> TrainingStateFromCheckpoint(const CheckpointReader& reader) {
  TrainingState state;
  state.epochs_done = reader.epoch();
  state.global_step = reader.step();
  const nlohmann::json& metadata = reader.metadata();
  if (metadata.is_object() && metadata.contains("variables")) {
    const nlohmann::json& variables = metadata["variables"];
    if (!variables.is_object()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", reader.path(), ": metadata.variables is not an object"));
    }
    for (const auto& [name, entry] : variables.items()) {
      if (!entry.is_object()) {
        return absl::DataLossError(absl::StrCat("checkpoint ", reader.path(),
                                                ": metadata.variables.", name,
                                                " is not an object"));
      }
      FitVariableState v;
      v.name = name;
      PS_ASSIGN_OR_RETURN(v.value, TensorNamed(reader, name));
      const nlohmann::json& iterations = entry.contains("iterations") ? entry["iterations"]
                                                                       : nlohmann::json(0);
      if (!iterations.is_number_integer()) {
        return absl::DataLossError(absl::StrCat("checkpoint ", reader.path(), ": iterations of ",
                                                name, " is not an integer"));
      }
      v.iterations = iterations.get<int64_t>();
      if (entry.contains("slots")) {
        if (!entry["slots"].is_array()) {
          return absl::DataLossError(absl::StrCat("checkpoint ", reader.path(), ": slots of ",
                                                  name, " is not a list"));
        }
        for (const nlohmann::json& slot : entry["slots"]) {
          if (!slot.is_string()) {
            return absl::DataLossError(absl::StrCat("checkpoint ", reader.path(),
                                                    ": a slot name of ", name,
                                                    " is not a string"));
          }
          PS_ASSIGN_OR_RETURN(Tensor t,
                              TensorNamed(reader, SlotTensorName(name, slot.get<std::string>())));
          v.slots.push_back({slot.get<std::string>(), std::move(t)});
        }
      }
      state.variables.push_back(std::move(v));
    }
    return state;
  }
  // No metadata: infer variables and slots from the tensor names alone.
  for (const NamedTensor& t : reader.tensors()) {
    if (absl::StrContains(t.name, kSlotInfix)) continue;
    FitVariableState v;
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

}  // namespace pstrain
