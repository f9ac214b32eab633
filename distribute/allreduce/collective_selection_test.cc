#include "distribute/allreduce/collective_selection.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "distribute/allreduce/in_process_ring.h"
#include "distribute/allreduce/ring_allreduce.h"

namespace pstrain {
namespace {

TEST(CollectiveSelectionTest, ParsesTheFlag) {
  EXPECT_EQ(*ParseCollectiveKind("auto"), CollectiveKind::kAuto);
  EXPECT_EQ(*ParseCollectiveKind("ring"), CollectiveKind::kRing);
  EXPECT_EQ(*ParseCollectiveKind("nccl"), CollectiveKind::kNccl);
  EXPECT_EQ(ParseCollectiveKind("gloo").status().code(), absl::StatusCode::kInvalidArgument);
}

// Runs SelectCollective on every rank of an in-process ring, rank r with kinds[r] and
// devices[r].
std::vector<absl::StatusOr<CollectiveSelection>> SelectOnAll(
    const std::vector<CollectiveKind>& kinds, const std::vector<int>& devices) {
  const int n = static_cast<int>(kinds.size());
  InProcessRing ring(n);
  std::vector<std::unique_ptr<RingAllReduce>> reducers;
  RingAllReduceOptions options;
  options.timeout = absl::Seconds(10);
  for (int r = 0; r < n; ++r) {
    reducers.push_back(std::make_unique<RingAllReduce>(ring.transport(r), options));
  }
  std::vector<absl::StatusOr<CollectiveSelection>> results;
  for (int r = 0; r < n; ++r) results.emplace_back(absl::UnknownError("did not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      RingAllReduce* reducer = reducers[r].get();
      results[r] = SelectCollective(
          [reducer](absl::Span<const absl::Span<float>> t) { return reducer->AllReduceSum(t); },
          r, n, kinds[r], devices[r], absl::Seconds(10));
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(CollectiveSelectionTest, CpuWorkersUseTheRing) {
  for (const auto& r : SelectOnAll({CollectiveKind::kAuto, CollectiveKind::kAuto},
                                   {-1, -1})) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->nccl, nullptr);
    EXPECT_NE(r->description.find("gRPC ring"), std::string::npos) << r->description;
  }
}

// One worker without a CUDA device keeps every worker on the ring, whatever the build.
TEST(CollectiveSelectionTest, OneCpuWorkerKeepsEveryoneOnTheRing) {
  for (const auto& r : SelectOnAll({CollectiveKind::kAuto, CollectiveKind::kAuto,
                                    CollectiveKind::kAuto},
                                   {0, -1, 1})) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->nccl, nullptr);
  }
}

TEST(CollectiveSelectionTest, RingFlagWins) {
  for (const auto& r : SelectOnAll({CollectiveKind::kRing, CollectiveKind::kRing}, {0, 1})) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->nccl, nullptr);
    EXPECT_NE(r->description.find("--collective=ring"), std::string::npos) << r->description;
  }
}

// In a CUDA build (no GPU needed: the devices are only flags here). Without CUDA,
// --collective=nccl fails at once on the rank that asks (next test).
TEST(CollectiveSelectionTest, NcclWhenImpossibleIsAnErrorOnEveryRank) {
  if (!NcclBuiltIn()) GTEST_SKIP() << "a build without CUDA fails before the agreement";
  for (const auto& r : SelectOnAll({CollectiveKind::kNccl, CollectiveKind::kAuto}, {0, -1})) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_NE(r.status().message().find("--collective=nccl"), std::string::npos) << r.status();
  }
}

TEST(CollectiveSelectionTest, NcclWithoutCudaBuildFailsAtOnce) {
  if (NcclBuiltIn()) GTEST_SKIP() << "this build has CUDA";
  const absl::StatusOr<CollectiveSelection> r = SelectCollective(
      [](absl::Span<const absl::Span<float>>) -> absl::Status {
        ADD_FAILURE() << "the ring must not be used";
        return absl::OkStatus();
      },
      0, 2, CollectiveKind::kNccl, 0, absl::Seconds(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("built without CUDA"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace pstrain
