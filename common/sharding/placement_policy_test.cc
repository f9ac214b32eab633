#include "common/sharding/placement_policy.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

TEST(PlacementTest, PolicyFromJson) {
  auto defaults = PlacementPolicyFromJson(nullptr);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->strategy, PlacementStrategy::kSizeBalanced);
  EXPECT_EQ(defaults->min_shard_bytes, 256 << 10);
  EXPECT_EQ(defaults->max_shards, 0);
  auto given = PlacementPolicyFromJson(nlohmann::json::parse(
      R"({"strategy": "round_robin", "num_shards": 3, "min_shard_bytes": 1024,
          "max_shards": 2})"));
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->strategy, PlacementStrategy::kRoundRobin);
  EXPECT_EQ(given->num_shards, 3);
  EXPECT_EQ(given->min_shard_bytes, 1024);
  EXPECT_EQ(given->max_shards, 2);
  for (const char* bad :
       {R"("round_robin")", R"({"strategy": "random"})", R"({"strategy": 1})",
        R"({"num_shards": -1})", R"({"num_shards": 1.5})", R"({"num_shards": "2"})",
        R"({"min_shard_bytes": 0})", R"({"max_shards": 0})", R"({"shards": 2})"}) {
    auto policy = PlacementPolicyFromJson(nlohmann::json::parse(bad));
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(std::string(policy.status().message()).find('\n'), std::string::npos);
    EXPECT_EQ(policy.status().message().rfind("placement", 0), 0u) << policy.status();
  }
}

TEST(PlacementTest, PolicyToJsonReadsBack) {
  PlacementPolicy policy;
  policy.strategy = PlacementStrategy::kRoundRobin;
  policy.num_shards = 3;
  policy.min_shard_bytes = 4096;
  for (int max_shards : {0, 5}) {
    policy.max_shards = max_shards;
    auto back = PlacementPolicyFromJson(PlacementPolicyToJson(policy));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == policy) << PlacementPolicyToJson(policy).dump();
  }
  auto defaults = PlacementPolicyFromJson(PlacementPolicyToJson(PlacementPolicy()));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_TRUE(*defaults == PlacementPolicy());
}

}  // namespace
}  // namespace pstrain
