#include "common/sharding/placement.h"

#include <algorithm>
#include <map>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<int64_t> Shape(const google::protobuf::RepeatedField<int64_t>& f) {
  return std::vector<int64_t>(f.begin(), f.end());
}

PlacementPolicy Fixed(PlacementStrategy strategy, int num_shards) {
  PlacementPolicy policy;
  policy.strategy = strategy;
  policy.num_shards = num_shards;
  return policy;
}

// Bytes held by each ps under `placement`.
std::vector<int64_t> Loads(const std::vector<VariablePlacementEntry>& placement, int num_ps) {
  std::vector<int64_t> load(num_ps, 0);
  for (const auto& e : placement) load[e.ps_index()] += NumElements(Shape(e.shape())) * 4;
  return load;
}

TEST(PlacementTest, RoundRobinSpreadsVariablesInOrder) {
  auto placement = PlaceRoundRobin(
      {{"dense/kernel", {784, 64}}, {"dense/bias", {64}}, {"dense_1/kernel", {64, 10}}}, 2);
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement->size(), 3u);
  EXPECT_EQ((*placement)[0].ps_index(), 0);
  EXPECT_EQ((*placement)[1].ps_index(), 1);
  EXPECT_EQ((*placement)[2].ps_index(), 0);
  EXPECT_EQ((*placement)[0].shape(1), 64);
  // Unsplit: the plain name, one shard covering every row, shard shape = full shape.
  const VariablePlacementEntry& k = (*placement)[0];
  EXPECT_EQ(k.name(), "dense/kernel");
  EXPECT_EQ(k.variable_name(), "dense/kernel");
  EXPECT_EQ(k.row_offset(), 0);
  EXPECT_EQ(k.num_rows(), 784);
  EXPECT_EQ(k.num_shards(), 1);
  EXPECT_EQ(Shape(k.full_shape()), (std::vector<int64_t>{784, 64}));
  EXPECT_EQ(Shape(k.shape()), (std::vector<int64_t>{784, 64}));
}

TEST(PlacementTest, RoundRobinPlacesShardsOneAfterAnother) {
  auto placement = PlaceVariables({{"a", {4, 2}}, {"b", {3}}}, 3,
                                  Fixed(PlacementStrategy::kRoundRobin, 2));
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_EQ(placement->size(), 4u);
  EXPECT_EQ((*placement)[0].name(), "a/part_0");
  EXPECT_EQ((*placement)[1].name(), "a/part_1");
  EXPECT_EQ((*placement)[2].name(), "b/part_0");
  EXPECT_EQ((*placement)[3].name(), "b/part_1");
  EXPECT_EQ((*placement)[0].ps_index(), 0);
  EXPECT_EQ((*placement)[1].ps_index(), 1);
  EXPECT_EQ((*placement)[2].ps_index(), 2);
  EXPECT_EQ((*placement)[3].ps_index(), 0);
}

TEST(PlacementTest, SizeBalancedPutsLargestFirstOnLeastLoaded) {
  PlacementPolicy policy;  // size_balanced, 256 KiB shards: nothing here is split
  // Bytes: a 40, b 400, c 240, d 200, e 40.
  auto placement = PlaceVariables(
      {{"a", {10}}, {"b", {100}}, {"c", {60}}, {"d", {50}}, {"e", {10}}}, 2, policy);
  ASSERT_TRUE(placement.ok()) << placement.status();
  // Output stays in model order.
  std::vector<std::string> names;
  for (const auto& e : *placement) names.push_back(e.name());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  // b(400)->0; c(240)->1; d(200)->1 (240 < 400); a(40)->0 (400 < 440); e(40)->0 (both
  // hold 440: a tie goes to the lower index). a comes before e: equal sizes keep order.
  std::map<std::string, int> ps;
  for (const auto& e : *placement) ps[e.name()] = e.ps_index();
  EXPECT_EQ(ps["b"], 0);
  EXPECT_EQ(ps["c"], 1);
  EXPECT_EQ(ps["d"], 1);
  EXPECT_EQ(ps["a"], 0);
  EXPECT_EQ(ps["e"], 0);
  EXPECT_EQ(Loads(*placement, 2), (std::vector<int64_t>{480, 440}));
}

TEST(PlacementTest, SizeBalancedTiesGoToTheLowestPsAndKeepModelOrder) {
  auto placement = PlaceVariables({{"x", {8}}, {"y", {8}}, {"z", {8}}, {"w", {8}}}, 3,
                                  PlacementPolicy{});
  ASSERT_TRUE(placement.ok());
  EXPECT_EQ((*placement)[0].ps_index(), 0);
  EXPECT_EQ((*placement)[1].ps_index(), 1);
  EXPECT_EQ((*placement)[2].ps_index(), 2);
  EXPECT_EQ((*placement)[3].ps_index(), 0);
}

TEST(PlacementTest, SizeBalancedBeatsRoundRobinOnSkewedModels) {
  // The seed's model: a big kernel, small bias, small kernel, small bias.
  std::vector<VariableShape> model = {
      {"dense/kernel", {784, 64}}, {"dense/bias", {64}}, {"dense_1/kernel", {64, 10}},
      {"dense_1/bias", {10}}};
  PlacementPolicy unsplit;
  unsplit.max_shards = 1;
  auto balanced = PlaceVariables(model, 2, unsplit);
  ASSERT_TRUE(balanced.ok());
  // The big kernel alone on ps 0; everything else on ps 1.
  EXPECT_EQ((*balanced)[0].ps_index(), 0);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ((*balanced)[i].ps_index(), 1);
  // Round-robin puts both kernels on ps 0 and both biases on ps 1. The busiest ps is what
  // a step waits for: size-balanced leaves it less to hold.
  auto round_robin = PlaceRoundRobin(model, 2);
  ASSERT_TRUE(round_robin.ok());
  const std::vector<int64_t> balanced_loads = Loads(*balanced, 2);
  const std::vector<int64_t> round_robin_loads = Loads(*round_robin, 2);
  EXPECT_EQ(balanced_loads, (std::vector<int64_t>{784 * 64 * 4, (64 + 64 * 10 + 10) * 4}));
  EXPECT_EQ(round_robin_loads, (std::vector<int64_t>{(784 * 64 + 64 * 10) * 4, (64 + 10) * 4}));
  EXPECT_LT(*std::max_element(balanced_loads.begin(), balanced_loads.end()),
            *std::max_element(round_robin_loads.begin(), round_robin_loads.end()));
}

TEST(PlacementTest, MinShardBytesDecidesTheShardCount) {
  // 784 x 64 floats = 200704 bytes.
  PlacementPolicy policy;
  policy.min_shard_bytes = 50000;  // floor(200704 / 50000) = 4
  policy.max_shards = 10;
  auto placement = PlaceVariables({{"k", {784, 64}}, {"b", {64}}}, 2, policy);
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement->size(), 5u);  // 4 kernel shards + the whole bias
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ((*placement)[s].num_rows(), 196);
    EXPECT_EQ((*placement)[s].row_offset(), 196 * s);
    EXPECT_EQ((*placement)[s].num_shards(), 4);
    EXPECT_EQ((*placement)[s].shard_index(), s);
    EXPECT_EQ(Shape((*placement)[s].shape()), (std::vector<int64_t>{196, 64}));
  }
  EXPECT_EQ((*placement)[4].name(), "b");
  // The four equal shards spread evenly; the bias joins the first least-loaded ps.
  std::vector<int64_t> loads = Loads(*placement, 2);
  EXPECT_EQ(loads[0] + loads[1], 200704 + 256);
  EXPECT_LE(std::abs(loads[0] - loads[1]), 256);
}

TEST(PlacementTest, MaxShardsCapsAndDefaultsToTheNumberOfPs) {
  PlacementPolicy policy;
  policy.min_shard_bytes = 4;  // would allow one shard per row
  auto by_ps = PlaceVariables({{"k", {100, 3}}}, 3, policy);
  ASSERT_TRUE(by_ps.ok());
  EXPECT_EQ(by_ps->size(), 3u);  // max_shards defaults to 3 ps
  policy.max_shards = 5;
  auto capped = PlaceVariables({{"k", {100, 3}}}, 3, policy);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->size(), 5u);
  policy.max_shards = 1;
  auto off = PlaceVariables({{"k", {100, 3}}}, 3, policy);
  ASSERT_TRUE(off.ok());
  ASSERT_EQ(off->size(), 1u);
  EXPECT_EQ((*off)[0].name(), "k");
}

TEST(PlacementTest, DefaultPolicyLeavesSmallVariablesWhole) {
  auto placement = PlaceVariables({{"k", {784, 64}}}, 4, PlacementPolicy{});
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement->size(), 1u);  // 200704 bytes < 256 KiB
  auto big = PlaceVariables({{"emb", {10000, 64}}}, 4, PlacementPolicy{});
  ASSERT_TRUE(big.ok());
  // 2,560,000 bytes / 262144 = 9, capped at 4 ps.
  ASSERT_EQ(big->size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ((*big)[s].ps_index(), s);
}

TEST(PlacementTest, FixedShardsIgnoreSizeKnobs) {
  PlacementPolicy policy = Fixed(PlacementStrategy::kSizeBalanced, 3);
  policy.max_shards = 1;
  auto placement = PlaceVariables({{"tiny", {6, 1}}}, 2, policy);
  ASSERT_TRUE(placement.ok());
  EXPECT_EQ(placement->size(), 3u);
}

TEST(PlacementTest, RowsThatDoNotDivideGoOneExtraToTheFirstShards) {
  auto placement =
      PlaceVariables({{"v", {10, 2}}}, 4, Fixed(PlacementStrategy::kRoundRobin, 4));
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement->size(), 4u);
  std::vector<int64_t> rows, offsets;
  for (const auto& e : *placement) {
    rows.push_back(e.num_rows());
    offsets.push_back(e.row_offset());
    EXPECT_EQ(e.shape(0), e.num_rows());
    EXPECT_EQ(e.shape(1), 2);
    EXPECT_EQ(Shape(e.full_shape()), (std::vector<int64_t>{10, 2}));
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 3, 6, 8}));
}

TEST(PlacementTest, NeverMoreShardsThanRows) {
  auto placement = PlaceVariables({{"v", {3, 100}}, {"one", {1, 50}}, {"s", {}}}, 8,
                                  Fixed(PlacementStrategy::kRoundRobin, 8));
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement->size(), 5u);  // 3 + 1 + 1
  EXPECT_EQ((*placement)[3].name(), "one");
  EXPECT_EQ((*placement)[3].num_rows(), 1);
  EXPECT_EQ((*placement)[4].name(), "s");
  EXPECT_EQ((*placement)[4].num_shards(), 1);
  EXPECT_TRUE((*placement)[4].shape().empty());
}

TEST(PlacementTest, NoPsIsAnError) {
  EXPECT_EQ(PlaceRoundRobin({{"w", {1}}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVariables({{"w", {1}}}, 0, PlacementPolicy{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlacementTest, BadPolicyOrVariablesAreInvalidArgument) {
  PlacementPolicy negative_shards;
  negative_shards.num_shards = -1;
  PlacementPolicy zero_bytes;
  zero_bytes.min_shard_bytes = 0;
  PlacementPolicy negative_max;
  negative_max.max_shards = -2;
  PlacementPolicy bad_strategy;
  bad_strategy.strategy = static_cast<PlacementStrategy>(7);
  for (const PlacementPolicy& p : {negative_shards, zero_bytes, negative_max, bad_strategy}) {
    EXPECT_EQ(PlaceVariables({{"w", {4}}}, 2, p).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(PlaceVariables({{"w", {4}}, {"w", {4}}}, 2, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVariables({{"", {4}}}, 2, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVariables({{"w", {-4}}}, 2, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
