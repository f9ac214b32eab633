#include "common/sharding/shards_by_ps.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Reads every ps that holds a shard, all at once: read_one(p, names) for each.
absl::Status ReadEveryPs(const std::vector<std::vector<ShardRef>>& by_ps,
                         const std::function<absl::Status(int, const std::vector<std::string>&)>&
                             read_one) {
  std::vector<std::function<absl::Status()>> reads;
  for (size_t p = 0; p < by_ps.size(); ++p) {
    if (by_ps[p].empty()) continue;
    reads.push_back([&by_ps, &read_one, p] {
      return read_one(static_cast<int>(p), ShardNames(by_ps[p]));
    });
  }
  return RunConcurrently(reads);
}

absl::Status CheckAnswerCount(int ps, size_t answered, size_t asked) {
  if (answered == asked) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("ps ", ps, " answered ", answered, " values for ", asked, " shards"));
}

}  // namespace

std::vector<std::vector<ShardRef>> ShardsByPs(const std::vector<VariableLayout>& layout,
                                              int num_ps) {
  std::vector<std::vector<ShardRef>> by_ps(std::max(num_ps, 0));
  for (size_t i = 0; i < layout.size(); ++i) {
    for (const VariablePlacementEntry& shard : layout[i].shards) {
      by_ps[shard.ps_index()].push_back({static_cast<int>(i), shard});
    }
  }
  return by_ps;
}

std::vector<std::string> ShardNames(const std::vector<ShardRef>& shards) {
  std::vector<std::string> names;
  names.reserve(shards.size());
  for (const ShardRef& ref : shards) names.push_back(ref.entry.name());
  return names;
}

std::vector<Tensor> EmptyFullTensors(const std::vector<VariableLayout>& layout) {
  std::vector<Tensor> full(layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    if (!layout[i].whole()) full[i] = Tensor(layout[i].shape);
  }
  return full;
}

absl::Status PutShard(const std::vector<VariableLayout>& layout, const ShardRef& ref,
                      Tensor value, std::vector<Tensor>* full) {
  const VariableLayout& variable = layout[ref.variable];
  if (!variable.whole()) return CopyShardInto(value, ref.entry, &(*full)[ref.variable]);
  if (value.shape() != variable.shape) {
    return absl::InvalidArgumentError(absl::StrCat("variable \"", variable.name, "\" of shape ",
                                                   ShapeToString(variable.shape), " got a value ",
                                                   "of shape ", value.ShapeString()));
  }
  (*full)[ref.variable] = std::move(value);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> GatherValues(const std::vector<VariableLayout>& layout,
                                                 int num_ps, const ReadShardValues& read) {
  const std::vector<std::vector<ShardRef>> by_ps = ShardsByPs(layout, num_ps);
  std::vector<Tensor> full = EmptyFullTensors(layout);
  PS_RETURN_IF_ERROR(ReadEveryPs(
      by_ps, [&](int p, const std::vector<std::string>& names) -> absl::Status {
        PS_ASSIGN_OR_RETURN(std::vector<Tensor> values, read(p, names));
        PS_RETURN_IF_ERROR(CheckAnswerCount(p, values.size(), names.size()));
        for (size_t k = 0; k < values.size(); ++k) {
          PS_RETURN_IF_ERROR(PutShard(layout, by_ps[p][k], std::move(values[k]), &full));
        }
        return absl::OkStatus();
      }));
  return full;
}

absl::StatusOr<std::vector<VariableSnapshot>> GatherStates(
    const std::vector<VariableLayout>& layout, int num_ps, const ReadShardStates& read) {
  const std::vector<std::vector<ShardRef>> by_ps = ShardsByPs(layout, num_ps);
  // Each ps's answer is kept as it came; the variables are put together once all are in,
  // because a variable's slots are known only from its shards' answers.
  std::vector<std::vector<VariableSnapshot>> answers(by_ps.size());
  PS_RETURN_IF_ERROR(ReadEveryPs(
      by_ps, [&](int p, const std::vector<std::string>& names) -> absl::Status {
        PS_ASSIGN_OR_RETURN(answers[p], read(p, names));
        PS_RETURN_IF_ERROR(CheckAnswerCount(p, answers[p].size(), names.size()));
        for (size_t k = 0; k < names.size(); ++k) {
          if (answers[p][k].name != names[k]) {
            return absl::InternalError(absl::StrCat("ps ", p, " did not return the state of ",
                                                    names[k], " (it sent ",
                                                    answers[p][k].name, ")"));
          }
        }
        return absl::OkStatus();
      }));
  std::vector<VariableSnapshot> states(layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    states[i].name = layout[i].name;
    states[i].value = Tensor(layout[i].shape);
  }
  std::vector<bool> slots_known(layout.size(), false);
  for (size_t p = 0; p < by_ps.size(); ++p) {
    for (size_t k = 0; k < by_ps[p].size(); ++k) {
      const ShardRef& ref = by_ps[p][k];
      const VariableSnapshot& shard = answers[p][k];
      VariableSnapshot& state = states[ref.variable];
      PS_RETURN_IF_ERROR(CopyShardInto(shard.value, ref.entry, &state.value));
      if (!slots_known[ref.variable]) {
        for (const NamedTensor& slot : shard.slots) {
          state.slots.push_back({slot.name, Tensor(layout[ref.variable].shape)});
        }
        slots_known[ref.variable] = true;
      }
      if (shard.slots.size() != state.slots.size()) {
        return absl::InternalError(absl::StrCat("shards of ", state.name, " keep different slots"));
      }
      for (size_t s = 0; s < shard.slots.size(); ++s) {
        if (shard.slots[s].name != state.slots[s].name) {
          return absl::InternalError(
              absl::StrCat("shards of ", state.name, " keep different slots"));
        }
        PS_RETURN_IF_ERROR(CopyShardInto(shard.slots[s].tensor, ref.entry, &state.slots[s].tensor));
      }
      state.iterations = std::max(state.iterations, shard.iterations);
      state.version = std::max(state.version, shard.version);
    }
  }
  return states;
}

absl::StatusOr<std::vector<std::vector<NamedTensor>>> ScatterValues(
    const std::vector<VariableLayout>& layout, int num_ps, std::vector<Tensor> values) {
  if (values.size() != layout.size()) {
    return absl::InvalidArgumentError(absl::StrCat(values.size(), " values for ",
                                                   layout.size(), " variables"));
  }
  std::vector<std::vector<NamedTensor>> per_ps(std::max(num_ps, 0));
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].whole()) {
      const VariablePlacementEntry& shard = layout[i].shards[0];
      if (values[i].shape() != layout[i].shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", layout[i].name, "\" is ", ShapeToString(layout[i].shape),
            ", its value ", values[i].ShapeString()));
      }
      per_ps[shard.ps_index()].push_back({shard.name(), std::move(values[i])});
      continue;
    }
    for (const VariablePlacementEntry& shard : layout[i].shards) {
      PS_ASSIGN_OR_RETURN(Tensor rows, SliceShard(values[i], shard));
      per_ps[shard.ps_index()].push_back({shard.name(), std::move(rows)});
    }
  }
  return per_ps;
}

absl::StatusOr<std::vector<std::vector<VariableSnapshot>>> ScatterStates(
    const std::vector<VariableLayout>& layout, int num_ps,
    const std::vector<VariableSnapshot>& states) {
  if (states.size() != layout.size()) {
    return absl::InvalidArgumentError(absl::StrCat(states.size(), " variable states for ",
                                                   layout.size(), " variables"));
  }
  std::vector<std::vector<VariableSnapshot>> per_ps(std::max(num_ps, 0));
  for (size_t i = 0; i < layout.size(); ++i) {
    const VariableSnapshot& state = states[i];
    for (const VariablePlacementEntry& shard : layout[i].shards) {
      VariableSnapshot s;
      s.name = shard.name();
      PS_ASSIGN_OR_RETURN(s.value, SliceShard(state.value, shard));
      s.iterations = state.iterations;
      s.version = state.version;
      for (const NamedTensor& slot : state.slots) {
        PS_ASSIGN_OR_RETURN(Tensor rows, SliceShard(slot.tensor, shard));
        s.slots.push_back({slot.name, std::move(rows)});
      }
      per_ps[shard.ps_index()].push_back(std::move(s));
    }
  }
  return per_ps;
}

}  // namespace pstrain
