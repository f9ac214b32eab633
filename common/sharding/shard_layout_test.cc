#include "common/sharding/shard_layout.h"

#include "common/sharding/test_placement.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(PlacementTest, SplitIntoShardsDividesRowsAndNamesParts) {
  auto parts = SplitIntoShards({"emb", {7, 3}}, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].name(), "emb/part_0");
  EXPECT_EQ(parts[2].name(), "emb/part_2");
  EXPECT_EQ(parts[0].num_rows(), 3);
  EXPECT_EQ(parts[1].num_rows(), 2);
  EXPECT_EQ(parts[2].row_offset(), 5);
  EXPECT_EQ(parts[2].shape(0), 2);
  EXPECT_EQ(parts[2].shape(1), 3);
  EXPECT_EQ(parts[2].full_shape(0), 7);
  EXPECT_EQ(parts[1].shard_index(), 1);
  EXPECT_EQ(parts[1].num_shards(), 3);
  // Never more shards than rows; a scalar or a single row stays whole and keeps its name.
  EXPECT_EQ(SplitIntoShards({"v", {2, 4}}, 5).size(), 2u);
  auto scalar = SplitIntoShards({"s", {}}, 4);
  ASSERT_EQ(scalar.size(), 1u);
  EXPECT_EQ(scalar[0].name(), "s");
  EXPECT_EQ(scalar[0].num_rows(), 1);
  EXPECT_EQ(SplitIntoShards({"r", {1, 9}}, 4).size(), 1u);
}

TEST(PlacementTest, ResolveLayoutGroupsShardsAndAcceptsOldEntries) {
  std::vector<VariableShape> model = {{"k", {5, 2}}, {"b", {2}}};
  auto placement = RoundRobinShardsForTest(model, 2, 2);
  // Shuffled order must not matter.
  std::vector<VariablePlacementEntry> shuffled(placement.rbegin(), placement.rend());
  auto layout = ResolveLayout(model, shuffled, 2);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->size(), 2u);
  EXPECT_EQ((*layout)[0].name, "k");
  ASSERT_EQ((*layout)[0].shards.size(), 2u);
  EXPECT_EQ((*layout)[0].shards[0].name(), "k/part_0");
  EXPECT_FALSE((*layout)[0].whole());

  // An entry from before partitioning: name, ps_index, shape only.
  VariablePlacementEntry old_k, old_b;
  old_k.set_name("k");
  old_k.set_ps_index(1);
  old_k.add_shape(5);
  old_k.add_shape(2);
  old_b.set_name("b");
  old_b.add_shape(2);
  auto old_layout = ResolveLayout(model, {old_k, old_b}, 2);
  ASSERT_TRUE(old_layout.ok()) << old_layout.status();
  EXPECT_TRUE((*old_layout)[0].whole());
  EXPECT_EQ((*old_layout)[0].shards[0].num_rows(), 5);
}

TEST(PlacementTest, ResolveLayoutRejectsWhatDoesNotFit) {
  std::vector<VariableShape> model = {{"k", {5, 2}}};
  auto placement = RoundRobinShardsForTest(model, 2, 2);
  auto code = [&](std::vector<VariablePlacementEntry> p, int num_ps = 2) {
    return ResolveLayout(model, p, num_ps).status().code();
  };
  EXPECT_EQ(code(placement), absl::StatusCode::kOk);
  EXPECT_EQ(code({placement[0]}), absl::StatusCode::kInvalidArgument);  // rows 3-4 missing
  EXPECT_EQ(code({}), absl::StatusCode::kInvalidArgument);              // not placed
  EXPECT_EQ(code(placement, 1), absl::StatusCode::kInvalidArgument);    // ps 1 of 1
  auto overlap = placement;
  overlap[1].set_row_offset(2);
  overlap[1].set_name("k/part_x");
  EXPECT_EQ(code(overlap), absl::StatusCode::kInvalidArgument);
  auto wrong_full = placement;
  wrong_full[0].set_full_shape(1, 3);
  EXPECT_EQ(code(wrong_full), absl::StatusCode::kInvalidArgument);
  auto wrong_shard = placement;
  wrong_shard[0].set_shape(0, 2);
  EXPECT_EQ(code(wrong_shard), absl::StatusCode::kInvalidArgument);
  auto unknown = placement;
  unknown[0].set_variable_name("q");
  EXPECT_EQ(code(unknown), absl::StatusCode::kInvalidArgument);
  auto twice = placement;
  twice.push_back(placement[0]);
  EXPECT_EQ(code(twice), absl::StatusCode::kInvalidArgument);
}

TEST(PlacementTest, SliceAndCopyShardRoundTrip) {
  auto placement = RoundRobinShardsForTest({{"v", {5, 2}}}, 2, 2);
  Tensor full({5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto part1 = SliceShard(full, placement[1]);
  ASSERT_TRUE(part1.ok());
  EXPECT_EQ(part1->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::vector<float>(part1->values().begin(), part1->values().end()),
            (std::vector<float>{6, 7, 8, 9}));
  Tensor rebuilt({5, 2});
  for (const auto& shard : placement) {
    ASSERT_TRUE(CopyShardInto(*SliceShard(full, shard), shard, &rebuilt).ok());
  }
  EXPECT_EQ(std::vector<float>(rebuilt.values().begin(), rebuilt.values().end()),
            std::vector<float>(full.values().begin(), full.values().end()));
  Tensor wrong({4, 2});
  EXPECT_EQ(SliceShard(wrong, placement[0]).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CopyShardInto(Tensor({3, 2}), placement[1], &rebuilt).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
