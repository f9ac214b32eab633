#include "common/data/dataset.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 5 examples, 2 features: row i is (i, 10 i), label i % 3.
Dataset Five() {
  std::vector<float> x, y;
  for (int i = 0; i < 5; ++i) {
    x.push_back(i);
    x.push_back(10 * i);
    y.push_back(i % 3);
  }
  return Dataset{Tensor({5, 2}, x), Tensor({5}, y), 3};
}

TEST(DatasetTest, Accessors) {
  Dataset data = Five();
  EXPECT_TRUE(data.Validate().ok());
  EXPECT_EQ(data.num_examples(), 5);
  EXPECT_EQ(data.num_features(), 2);
  EXPECT_TRUE(data.sparse_labels());
  EXPECT_EQ(data.label_width(), 1);
}

TEST(DatasetTest, ShardTakesEveryNthFromIndex) {
  Dataset data = Five();
  absl::StatusOr<Dataset> shard = data.Shard(2, 1);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_THAT(shard->x.values(), ElementsAre(1, 10, 3, 30));
  EXPECT_THAT(shard->y.values(), ElementsAre(1, 0));
  EXPECT_EQ(shard->num_classes, 3);
  absl::StatusOr<Dataset> first = data.Shard(2, 0);
  ASSERT_TRUE(first.ok());
  EXPECT_THAT(first->y.values(), ElementsAre(0, 2, 1));
  absl::StatusOr<Dataset> all = data.Shard(1, 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->num_examples(), 5);
  absl::StatusOr<Dataset> empty = data.Shard(7, 6);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->num_examples(), 0);
  EXPECT_EQ(empty->x.ShapeString(), "[0,2]");

  EXPECT_EQ(data.Shard(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(data.Shard(2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(data.Shard(2, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DatasetTest, SliceAndScale) {
  Dataset data = Five();
  absl::StatusOr<Dataset> slice = data.Slice(3, 2);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_THAT(slice->x.values(), ElementsAre(3, 30, 4, 40));
  EXPECT_FALSE(data.Slice(4, 2).ok());
  EXPECT_FALSE(data.Slice(-1, 1).ok());
  data.ScaleFeatures(0.5f);
  EXPECT_THAT(data.x.values().subspan(0, 4), ElementsAre(0, 0, 0.5, 5));
}

TEST(DatasetTest, ValidateRejects) {
  Dataset bad_label = Five();
  bad_label.y.data()[2] = 3;
  EXPECT_THAT(std::string(bad_label.Validate().message()), HasSubstr("example 2"));
  Dataset fraction = Five();
  fraction.y.data()[0] = 0.5f;
  EXPECT_FALSE(fraction.Validate().ok());
  Dataset rows = Five();
  rows.y = Tensor({4});
  EXPECT_THAT(std::string(rows.Validate().message()), HasSubstr("5 feature rows but 4 labels"));
  EXPECT_FALSE(MakeDataset(Tensor({5}), Tensor({5}), 0).ok());
  EXPECT_FALSE(MakeDataset(Tensor({2, 2}, {1, 2, 3}), Tensor({2}), 0).ok());
  EXPECT_FALSE(MakeDataset(Tensor({2, 2}), Tensor({2, 3}), 4).ok());
  EXPECT_TRUE(MakeDataset(Tensor({2, 2}), Tensor({2, 4}), 4).ok());
  // Regression targets: no class check.
  EXPECT_TRUE(MakeDataset(Tensor({1, 1}), Tensor({1}, {-2.5f}), 0).ok());
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST(DatasetOneHotTest, ClassIdsBecomeRows) {
  auto d = MakeDataset(Tensor({3, 1}, {0, 1, 2}), Tensor({3}, {2, 0, 1}), 3);
  ASSERT_TRUE(d.ok()) << d.status();
  auto hot = d->OneHot();
  ASSERT_TRUE(hot.ok()) << hot.status();
  EXPECT_EQ(hot->y.shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(std::vector<float>(hot->y.values().begin(), hot->y.values().end()),
            (std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0}));
  // Already rows: unchanged.
  auto again = hot->OneHot();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->y.shape(), hot->y.shape());
}

TEST(DatasetOneHotTest, UnknownClassCountIsAnError) {
  auto d = MakeDataset(Tensor({1, 1}, {0}), Tensor({1}, {0}), 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->OneHot().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
