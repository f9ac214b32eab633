// The core Strategy: the default strategy runs one replica, and Reduce adds replicas'
// values in replica order.

#include "distribute/strategy.h"

#include <memory>
#include <vector>

#include "distribute/fit_test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(StrategyTest, DefaultStrategyRunsOneReplicaAndReduces) {
  std::unique_ptr<Strategy> s = CreateDefaultStrategy();
  EXPECT_EQ(s->name(), "default");
  EXPECT_EQ(s->num_replicas_in_sync(), 1);
  std::vector<int> seen;
  ASSERT_TRUE(s->Run([&](int r) {
                 seen.push_back(r);
                 return absl::OkStatus();
               }).ok());
  EXPECT_EQ(seen, std::vector<int>{0});
  EXPECT_EQ(s->Run([](int) { return absl::InternalError("boom"); }).message(), "boom");
  const std::vector<float> v = {1, 2, 3};
  std::vector<absl::Span<const float>> one = {v};
  absl::StatusOr<std::vector<float>> mean = s->Reduce(ReduceOp::kMean, one);
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(*mean, v);
  std::vector<absl::Span<const float>> two = {v, v};
  EXPECT_TRUE(absl::IsInvalidArgument(s->Reduce(ReduceOp::kSum, two).status()));
}

TEST(StrategyTest, ReduceSumsAndAveragesInReplicaOrder) {
  TwoReplicaStrategy s;
  const std::vector<float> a = {1, 2}, b = {3, 5};
  std::vector<absl::Span<const float>> v = {a, b};
  EXPECT_EQ(*s.Reduce(ReduceOp::kSum, v), (std::vector<float>{4, 7}));
  EXPECT_EQ(*s.Reduce(ReduceOp::kMean, v), (std::vector<float>{2, 3.5}));
  const std::vector<float> c = {1};
  std::vector<absl::Span<const float>> bad = {a, c};
  EXPECT_TRUE(absl::IsInvalidArgument(s.Reduce(ReduceOp::kSum, bad).status()));
}

}  // namespace
}  // namespace pstrain
