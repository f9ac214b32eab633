#include "ps_server/placement.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(PlacementTest, RoundRobinSpreadsVariablesInOrder) {
  auto placement = PlaceRoundRobin(
      {{"dense/kernel", {784, 64}}, {"dense/bias", {64}}, {"dense_1/kernel", {64, 10}}}, 2);
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement->size(), 3u);
  EXPECT_EQ((*placement)[0].ps_index(), 0);
  EXPECT_EQ((*placement)[1].ps_index(), 1);
  EXPECT_EQ((*placement)[2].ps_index(), 0);
  EXPECT_EQ((*placement)[0].shape(1), 64);
}

TEST(PlacementTest, NoPsIsAnError) {
  EXPECT_EQ(PlaceRoundRobin({{"w", {1}}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
