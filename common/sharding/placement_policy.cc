#include "common/sharding/placement_policy.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

const char* StrategyName(PlacementStrategy strategy) {
  return strategy == PlacementStrategy::kRoundRobin ? "round_robin" : "size_balanced";
}

}  // namespace

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

nlohmann::json PlacementPolicyToJson(const PlacementPolicy& policy) {
  nlohmann::json json = {{"strategy", StrategyName(policy.strategy)},
                         {"num_shards", policy.num_shards},
                         {"min_shard_bytes", policy.min_shard_bytes}};
  // 0 (= the number of ps) is the default and not a value the reader accepts.
  if (policy.max_shards > 0) json["max_shards"] = policy.max_shards;
  return json;
}

std::string DescribePolicy(const PlacementPolicy& policy) {
  std::string text = StrategyName(policy.strategy);
  if (policy.num_shards > 0) {
    absl::StrAppend(&text, ", num_shards ", policy.num_shards);
  } else {
    absl::StrAppend(&text, ", min_shard_bytes ", policy.min_shard_bytes, ", max_shards ",
                    policy.max_shards > 0 ? absl::StrCat(policy.max_shards)
                                          : std::string("= number of ps"));
  }
  return text;
}

}  // namespace pstrain
