// NcclAllReduce on one rank (one CUDA device): sums equal the input for awkward sizes, and
// errors surface as absl::Status. Skips when no CUDA device answers (the build machines);
// two ranks on two devices is checked by hand on a host with >= 2 GPUs (tests/gpu/README.md).

#include "distribute/allreduce/nccl_allreduce.h"

#include <cuda_runtime.h>

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "distribute/allreduce/nccl_id_codec.h"

namespace pstrain {
namespace {

class NcclAllReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      GTEST_SKIP() << "no CUDA device answered ("
                   << (e == cudaSuccess ? std::string("0 devices")
                                        : std::string("cudaGetDeviceCount: error ") +
                                              std::to_string(static_cast<int>(e)) + " (" +
                                              cudaGetErrorName(e) + ")")
                   << "); NCCL is checked on a GPU host, see tests/gpu/README.md";
    }
  }
};

TEST_F(NcclAllReduceTest, UniqueIdRoundTripsThroughTheCodec) {
  absl::StatusOr<std::vector<uint8_t>> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(id->size(), static_cast<size_t>(kNcclUniqueIdBytes));
  absl::StatusOr<std::vector<uint8_t>> back = DecodeNcclUniqueId(EncodeNcclUniqueId(*id));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *id);
}

TEST_F(NcclAllReduceTest, OneRankSumIsTheInput) {
  absl::StatusOr<std::vector<uint8_t>> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<NcclAllReduce>> nccl =
      NcclAllReduce::Create(0, 1, 0, *id, absl::Seconds(60));
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  // 0, 1 and 1000003 floats, fused into one call, then again (the buffer is reused), then
  // a call with nothing in it.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<float>> inputs = {std::vector<float>(0), std::vector<float>(1),
                                              std::vector<float>(1000003)};
    for (auto& v : inputs) {
      for (float& x : v) x = dist(rng);
    }
    std::vector<std::vector<float>> tensors = inputs;
    std::vector<absl::Span<float>> spans;
    for (auto& v : tensors) spans.push_back(absl::MakeSpan(v));
    const absl::Status st = (*nccl)->AllReduceSum(spans);
    ASSERT_TRUE(st.ok()) << st;
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(tensors[i], inputs[i]) << i;
  }
  std::vector<float> empty;
  EXPECT_TRUE((*nccl)->AllReduceSum({absl::MakeSpan(empty)}).ok());
  EXPECT_TRUE((*nccl)->AllReduceSum({}).ok());
}

TEST_F(NcclAllReduceTest, BadArgumentsAreStatuses) {
  absl::StatusOr<std::vector<uint8_t>> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(NcclAllReduce::Create(1, 1, 0, *id, absl::Seconds(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclAllReduce::Create(0, 1, -1, *id, absl::Seconds(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclAllReduce::Create(0, 1, 0, absl::MakeConstSpan(*id).subspan(1),
                                  absl::Seconds(5))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// A device that does not exist: the CUDA error comes back as a one-line Status naming the call.
TEST_F(NcclAllReduceTest, MissingDeviceNamesTheCall) {
  absl::StatusOr<std::vector<uint8_t>> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const absl::Status st = NcclAllReduce::Create(0, 1, 4096, *id, absl::Seconds(5)).status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cudaSetDevice"), std::string::npos) << st;
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st;
}

// Two ranks, but only rank 0 ever joins: creation must give up at the deadline, not hang.
TEST_F(NcclAllReduceTest, AMissingRankIsADeadline) {
  absl::StatusOr<std::vector<uint8_t>> id = NcclAllReduce::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const absl::Time start = absl::Now();
  const absl::Status st = NcclAllReduce::Create(0, 2, 0, *id, absl::Seconds(3)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace pstrain
