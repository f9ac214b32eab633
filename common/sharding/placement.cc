#include "common/sharding/placement.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// How many shards the policy gives `variable` (SplitIntoShards caps it at its rows).
int NumShardsFor(const VariableShape& variable, int num_ps, const PlacementPolicy& policy) {
  if (policy.num_shards > 0) return policy.num_shards;
  const int64_t bytes = NumElements(variable.shape) * static_cast<int64_t>(sizeof(float));
  const int64_t max_shards = policy.max_shards > 0 ? policy.max_shards : num_ps;
  return static_cast<int>(std::max<int64_t>(1, std::min(max_shards, bytes / policy.min_shard_bytes)));
}

int64_t ShardBytes(const VariablePlacementEntry& entry) {
  return NumElements(std::vector<int64_t>(entry.shape().begin(), entry.shape().end())) *
         static_cast<int64_t>(sizeof(float));
}

}  // namespace

PlacementPolicy RoundRobinUnpartitioned() {
  PlacementPolicy policy;
  policy.strategy = PlacementStrategy::kRoundRobin;
  policy.num_shards = 0;
  policy.max_shards = 1;
  return policy;
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
    for (VariablePlacementEntry& entry :
         SplitIntoShards(variable, NumShardsFor(variable, num_ps, policy))) {
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
  for (size_t i = 0; i < entries.size(); ++i) bytes[i] = ShardBytes(entries[i]);
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

}  // namespace pstrain
