#include "distribute/distributed_dataset.h"

#include <memory>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// N examples of 2 features (i, -i) with label i % 10.
std::shared_ptr<const Dataset> Numbered(int64_t n) {
  Tensor x({n, 2});
  Tensor y({n});
  for (int64_t i = 0; i < n; ++i) {
    x.values()[2 * i] = static_cast<float>(i);
    x.values()[2 * i + 1] = -static_cast<float>(i);
    y.values()[i] = static_cast<float>(i % 10);
  }
  absl::StatusOr<Dataset> d = MakeDataset(std::move(x), std::move(y), 10);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::make_shared<const Dataset>(*std::move(d));
}

std::vector<float> FirstFeatures(const ReplicaBatch& b) {
  std::vector<float> out;
  for (int64_t r = 0; r < b.rows(); ++r) out.push_back(b.x.values()[2 * r]);
  return out;
}

TEST(DistributedDatasetTest, EachReplicaGetsItsSliceOfTheSameGlobalBatch) {
  DistributedDatasetOptions o;
  o.global_batch_size = 10;
  o.shuffle = false;
  // All three replicas in one process, and the same three as three processes.
  auto all = DistributedDataset::Create(Numbered(25), o, 3, 0, 3);
  ASSERT_TRUE(all.ok()) << all.status();
  auto it = (*all)->MakeIterator(0);
  ASSERT_TRUE(it.ok());
  auto b = (*it)->Next();
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->replicas.size(), 3u);
  EXPECT_EQ(b->global_batch_size, 10);
  // Rows [10r/3, 10(r+1)/3): 3, 3, 4 rows.
  EXPECT_EQ(FirstFeatures(b->replicas[0]), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(FirstFeatures(b->replicas[1]), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(FirstFeatures(b->replicas[2]), (std::vector<float>{6, 7, 8, 9}));
  for (const ReplicaBatch& r : b->replicas) {
    EXPECT_EQ(r.global_batch_size, 10);
    EXPECT_EQ(r.y.shape()[0], r.rows());
  }
  EXPECT_EQ(b->replicas[2].y.values()[3], 9.0f);
  for (int rank = 0; rank < 3; ++rank) {
    auto one = DistributedDataset::Create(Numbered(25), o, 3, rank, 1);
    ASSERT_TRUE(one.ok());
    auto its = (*one)->MakeIterator(0);
    ASSERT_TRUE(its.ok());
    auto mine = (*its)->Next();
    ASSERT_TRUE(mine.ok());
    ASSERT_EQ(mine->replicas.size(), 1u);
    EXPECT_EQ(mine->first_replica, rank);
    EXPECT_EQ(FirstFeatures(mine->replicas[0]), FirstFeatures(b->replicas[rank])) << rank;
  }
  // The pass ends with a short batch of 5 (2, 1, 2 rows), then OUT_OF_RANGE.
  ASSERT_TRUE((*it)->Next().ok());
  auto last = (*it)->Next();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->global_batch_size, 5);
  EXPECT_EQ(last->replicas[0].rows() + last->replicas[1].rows() + last->replicas[2].rows(), 5);
  EXPECT_TRUE(absl::IsOutOfRange((*it)->Next().status()));
}

TEST(DistributedDatasetTest, EveryProcessShufflesAlikeAndEachEpochDiffers) {
  DistributedDatasetOptions o;
  o.global_batch_size = 100;
  o.seed = 7;
  auto a = DistributedDataset::Create(Numbered(100), o, 2, 0, 1);
  auto b = DistributedDataset::Create(Numbered(100), o, 2, 1, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  auto a0 = (*(*a)->MakeIterator(0))->Next();
  auto b0 = (*(*b)->MakeIterator(0))->Next();
  auto a1 = (*(*a)->MakeIterator(1))->Next();
  ASSERT_TRUE(a0.ok() && b0.ok() && a1.ok());
  // Together the two processes' slices are a permutation of the data.
  std::set<float> seen;
  for (float v : FirstFeatures(a0->replicas[0])) seen.insert(v);
  for (float v : FirstFeatures(b0->replicas[0])) seen.insert(v);
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_NE(FirstFeatures(a0->replicas[0]), FirstFeatures(a1->replicas[0]));
  // The same epoch again gives the same order.
  auto again = (*(*a)->MakeIterator(0))->Next();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(FirstFeatures(again->replicas[0]), FirstFeatures(a0->replicas[0]));
}

TEST(DistributedDatasetTest, RepeatsForeverWhenAsked) {
  DistributedDatasetOptions o;
  o.global_batch_size = 4;
  o.repeat = -1;
  auto d = DistributedDataset::Create(Numbered(6), o, 1, 0, 1);
  ASSERT_TRUE(d.ok());
  auto it = (*d)->MakeIterator(0);
  ASSERT_TRUE(it.ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*it)->Next().ok()) << i;
}

TEST(DistributedDatasetTest, RejectsWhatCannotBeSplit) {
  DistributedDatasetOptions o;
  EXPECT_TRUE(absl::IsInvalidArgument(DistributedDataset::Create(nullptr, o, 1, 0, 1).status()));
  o.global_batch_size = 0;
  EXPECT_TRUE(
      absl::IsInvalidArgument(DistributedDataset::Create(Numbered(4), o, 1, 0, 1).status()));
  o.global_batch_size = 2;
  o.repeat = 0;
  EXPECT_TRUE(
      absl::IsInvalidArgument(DistributedDataset::Create(Numbered(4), o, 1, 0, 1).status()));
  o.repeat = 1;
  EXPECT_TRUE(
      absl::IsInvalidArgument(DistributedDataset::Create(Numbered(4), o, 2, 1, 2).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(DistributedDataset::Create(Numbered(4), o, 0, 0, 1).status()));
}

}  // namespace
}  // namespace pstrain
