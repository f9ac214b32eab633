#include "chief/data_position.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

TEST(DataPositionTest, ResumesWhereTheEpochStood) {
  ShardQueue queue(3, 5, -1);
  auto chunk = queue.Take({1});
  ASSERT_TRUE(chunk.has_value());
  queue.Complete(*chunk, 5, false);  // shard 1 at step 5
  chunk = queue.Take({2});
  ASSERT_TRUE(chunk.has_value());
  queue.Complete(*chunk, 2, true);  // shard 2 finished
  RunStepsResponse figures;
  figures.set_loss_sum(3.5);
  figures.set_correct(9);
  figures.set_samples(28);
  figures.set_steps(7);
  const nlohmann::json position = DataPosition(4, 32, queue, figures);
  EXPECT_EQ(position["epoch"], 4);
  EXPECT_EQ(position["num_shards"], 3);

  ShardQueue resumed(3, 5, -1);
  RunStepsResponse resumed_figures;
  ASSERT_TRUE(ResumeFrom(position, 32, &resumed, &resumed_figures).ok());
  const std::vector<ShardQueue::Position> positions = resumed.Positions();
  ASSERT_EQ(positions.size(), 3u);
  EXPECT_EQ(positions[0].next_step, 0);
  EXPECT_EQ(positions[1].next_step, 5);
  EXPECT_FALSE(positions[1].finished);
  EXPECT_TRUE(positions[2].finished);
  EXPECT_DOUBLE_EQ(resumed_figures.loss_sum(), 3.5);
  EXPECT_EQ(resumed_figures.samples(), 28);
  EXPECT_EQ(resumed_figures.steps(), 7);
}

TEST(DataPositionTest, APositionThatDoesNotFitChangesNothing) {
  ShardQueue queue(2, 5, -1);
  RunStepsResponse figures;
  figures.set_samples(10);
  const nlohmann::json position = DataPosition(0, 32, queue, figures);
  ShardQueue other(2, 5, -1);
  RunStepsResponse other_figures;
  // Another batch size would name other batches.
  EXPECT_EQ(ResumeFrom(position, 64, &other, &other_figures).code(),
            absl::StatusCode::kInvalidArgument);
  nlohmann::json malformed = position;
  malformed["next_step"][0] = "x";
  EXPECT_EQ(ResumeFrom(malformed, 32, &other, &other_figures).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResumeFrom(nlohmann::json::array(), 32, &other, &other_figures).code(),
            absl::StatusCode::kInvalidArgument);
  ShardQueue three(3, 5, -1);  // another number of shards
  EXPECT_EQ(ResumeFrom(position, 32, &three, &other_figures).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other_figures.samples(), 0);
}

}  // namespace
}  // namespace pstrain
