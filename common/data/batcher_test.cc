#include "common/data/batcher.h"

#include <map>
#include <memory>
#include <vector>

#include "common/data/synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;

// n examples with 2 features (i, -i) and label i % 10, so every row names itself.
std::shared_ptr<const Dataset> Numbered(int n) {
  std::vector<float> x, y;
  for (int i = 0; i < n; ++i) {
    x.push_back(i);
    x.push_back(-i);
    y.push_back(i % 10);
  }
  return std::make_shared<const Dataset>(Dataset{Tensor({n, 2}, x), Tensor({n}, y), 10});
}

BatcherOptions Options(int64_t batch_size, int64_t shuffle_buffer = 0, uint64_t seed = 0,
                       int64_t epochs = 1, int prefetch = 0, bool drop_remainder = false) {
  BatcherOptions options;
  options.batch_size = batch_size;
  options.shuffle_buffer = shuffle_buffer;
  options.seed = seed;
  options.epochs = epochs;
  options.prefetch = prefetch;
  options.drop_remainder = drop_remainder;
  return options;
}

// Drains the batcher; returns the example ids of each epoch, checking rows stay intact.
std::vector<std::vector<int>> Drain(Batcher* batcher, std::vector<int64_t>* sizes = nullptr) {
  std::vector<std::vector<int>> epochs;
  int64_t step = 0;
  while (true) {
    absl::StatusOr<Batch> batch = batcher->Next();
    if (!batch.ok()) {
      EXPECT_EQ(batch.status().code(), absl::StatusCode::kOutOfRange) << batch.status();
      break;
    }
    EXPECT_EQ(batch->step, step++);
    if (static_cast<int64_t>(epochs.size()) <= batch->epoch) epochs.resize(batch->epoch + 1);
    const int64_t b = batch->x.shape()[0];
    if (sizes != nullptr) sizes->push_back(b);
    EXPECT_EQ(batch->y.shape()[0], b);
    for (int64_t i = 0; i < b; ++i) {
      const float id = batch->x.data()[2 * i];
      EXPECT_EQ(batch->x.data()[2 * i + 1], -id);
      EXPECT_EQ(batch->y.data()[i], static_cast<int>(id) % 10);
      epochs[batch->epoch].push_back(static_cast<int>(id));
    }
  }
  return epochs;
}

void ExpectEachOnce(const std::vector<int>& ids, int n) {
  std::vector<int> seen(n);
  for (int id : ids) ++seen[id];
  for (int i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "example " << i;
}

TEST(BatcherTest, InOrderWithRemainder) {
  auto batcher = Batcher::Create(Numbered(10), Options(4));
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  EXPECT_EQ((*batcher)->batches_per_epoch(), 3);
  std::vector<int64_t> sizes;
  auto epochs = Drain(batcher->get(), &sizes);
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_THAT(epochs[0], ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  EXPECT_THAT(sizes, ElementsAre(4, 4, 2));
  // End is sticky.
  EXPECT_EQ((*batcher)->Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(BatcherTest, DropRemainder) {
  auto batcher = Batcher::Create(Numbered(10), Options(4, 0, 0, 2, 0, true));
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  std::vector<int64_t> sizes;
  auto epochs = Drain(batcher->get(), &sizes);
  EXPECT_THAT(sizes, ElementsAre(4, 4, 4, 4));
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_THAT(epochs[1], ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST(BatcherTest, FullShuffleCoversEachExampleOncePerEpoch) {
  const int n = 103;
  auto batcher = Batcher::Create(Numbered(n), Options(8, 1000, 7, 3));
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  auto epochs = Drain(batcher->get());
  ASSERT_EQ(epochs.size(), 3u);
  for (const auto& ids : epochs) ExpectEachOnce(ids, n);
  EXPECT_NE(epochs[0], epochs[1]);  // reshuffled each epoch
  std::vector<int> in_order(n);
  for (int i = 0; i < n; ++i) in_order[i] = i;
  EXPECT_NE(epochs[0], in_order);

  // Same seed, same order.
  auto again = Batcher::Create(Numbered(n), Options(8, 1000, 7, 3));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Drain(again->get()), epochs);
}

TEST(BatcherTest, SmallBufferShuffleIsLocal) {
  const int n = 200;
  const int buffer = 5;
  auto batcher = Batcher::Create(Numbered(n), Options(7, buffer, 1));
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  auto epochs = Drain(batcher->get());
  ASSERT_EQ(epochs.size(), 1u);
  ExpectEachOnce(epochs[0], n);
  // TF's buffered shuffle: output k is drawn from the first k + buffer examples.
  for (int k = 0; k < n; ++k) EXPECT_LT(epochs[0][k], k + buffer) << "position " << k;
  std::vector<int> in_order(n);
  for (int i = 0; i < n; ++i) in_order[i] = i;
  EXPECT_NE(epochs[0], in_order);
}

TEST(BatcherTest, PrefetchGivesTheSameBatches) {
  const int n = 1000;
  BatcherOptions options = Options(32, 64, 3, 2);
  auto plain = Batcher::Create(Numbered(n), options);
  options.prefetch = 2;
  auto prefetched = Batcher::Create(Numbered(n), options);
  ASSERT_TRUE(plain.ok() && prefetched.ok());
  auto a = Drain(plain->get());
  auto b = Drain(prefetched->get());
  EXPECT_EQ(a, b);
  ASSERT_EQ(b.size(), 2u);
  for (const auto& ids : b) ExpectEachOnce(ids, n);
  EXPECT_EQ((*prefetched)->Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(BatcherTest, PrefetchShutsDownCleanly) {
  // Destroyed while the producer waits on a full queue, and while repeating forever.
  for (int i = 0; i < 20; ++i) {
    auto batcher = Batcher::Create(Numbered(50), Options(4, 0, 0, -1, 3));
    ASSERT_TRUE(batcher.ok());
    for (int j = 0; j < i; ++j) ASSERT_TRUE((*batcher)->Next().ok());
  }
}

TEST(BatcherTest, DenseLabels) {
  auto data = std::make_shared<const Dataset>(
      Dataset{Tensor({3, 1}, {0, 1, 2}), Tensor({3, 2}, {1, 0, 0, 1, 1, 0}), 2});
  auto batcher = Batcher::Create(data, Options(2, 3, 9));
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  absl::StatusOr<Batch> batch = (*batcher)->Next();
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->y.ShapeString(), "[2,2]");
  for (int i = 0; i < 2; ++i) {
    const int row = static_cast<int>(batch->x.data()[i]);
    EXPECT_EQ(batch->y.data()[2 * i], data->y.data()[2 * row]);
    EXPECT_EQ(batch->y.data()[2 * i + 1], data->y.data()[2 * row + 1]);
  }
}

TEST(BatcherTest, WorksOnSyntheticData) {
  absl::StatusOr<Dataset> data = MakeSyntheticDataset({});
  ASSERT_TRUE(data.ok());
  auto batcher = Batcher::Create(std::make_shared<const Dataset>(*std::move(data)),
                                 Options(128, 1000, 0, 1, 1));
  ASSERT_TRUE(batcher.ok());
  absl::StatusOr<Batch> batch = (*batcher)->Next();
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->x.ShapeString(), "[128,784]");
  EXPECT_EQ((*batcher)->batches_per_epoch(), 8);
}

TEST(BatcherTest, RejectsBadOptions) {
  EXPECT_FALSE(Batcher::Create(Numbered(4), Options(0)).ok());
  EXPECT_FALSE(Batcher::Create(Numbered(4), Options(32, -1)).ok());
  EXPECT_FALSE(Batcher::Create(Numbered(4), Options(32, 0, 0, 0)).ok());
  EXPECT_FALSE(Batcher::Create(Numbered(4), Options(32, 0, 0, 1, -1)).ok());
  EXPECT_FALSE(Batcher::Create(nullptr, {}).ok());
  // Would never yield.
  EXPECT_FALSE(Batcher::Create(Numbered(4), Options(8, 0, 0, -1, 0, true)).ok());
}

}  // namespace
}  // namespace pstrain
