#include "common/math/backend_factory.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(BackendFactoryTest, CpuWorks) {
  std::string note = "stale";
  auto backend = CreateBackend("cpu", &note);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cpu");
  EXPECT_TRUE((*backend)->IsHostMemory());
  EXPECT_EQ(note, "");  // cleared: nothing to explain

  // The backend computes: a 1x1 Gemm in its own memory.
  auto a = (*backend)->Allocate(1);
  auto c = (*backend)->Allocate(1);
  ASSERT_TRUE(a.ok() && c.ok());
  const float three = 3.0f;
  ASSERT_TRUE((*backend)->CopyToDevice(&three, 1, a->data()).ok());
  (*backend)->Gemm(false, false, 1, 1, 1, 1.0f, a->data(), a->data(), 0.0f, c->data());
  float out = 0.0f;
  ASSERT_TRUE((*backend)->CopyToHost(c->data(), 1, &out).ok());
  EXPECT_EQ(out, 9.0f);
}

TEST(BackendFactoryTest, NullNoteIsAccepted) {
  EXPECT_TRUE(CreateBackend("cpu", nullptr).ok());
  EXPECT_TRUE(CreateBackend("auto", nullptr).ok());
}

// This machine (and CI) has no GPU; in a CUDA build on a GPU machine auto picks CUDA.
TEST(BackendFactoryTest, AutoFallsBackToCpuWithANote) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device answered; auto picks it";
  std::string note;
  auto backend = CreateBackend("auto", &note);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cpu");
  EXPECT_FALSE(note.empty());
  EXPECT_NE(note.find("using the CPU"), std::string::npos) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos) << "the note is one line: " << note;
  if (BuiltWithCuda()) {
    EXPECT_NE(note.find("cudaGetDeviceCount"), std::string::npos) << note;
  } else {
    EXPECT_NE(note.find("--config=cuda"), std::string::npos) << note;
  }
}

TEST(BackendFactoryTest, CudaWithoutDeviceIsFailedPrecondition) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device answered";
  for (const char* device : {"cuda", "cuda:0", "cuda:3"}) {
    std::string note = "stale";
    auto backend = CreateBackend(device, &note);
    ASSERT_FALSE(backend.ok()) << device;
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition)
        << backend.status();
    EXPECT_NE(backend.status().message().find(device), std::string::npos)
        << "the message names the device: " << backend.status();
    EXPECT_EQ(std::string(backend.status().message()).find('\n'), std::string::npos);
  }
}

TEST(BackendFactoryTest, CudaOrdinalBeyondTheDevicesIsFailedPrecondition) {
  auto backend = CreateBackend("cuda:999999", nullptr);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition)
      << backend.status();
}

TEST(BackendFactoryTest, MalformedDeviceIsInvalidArgument) {
  const std::vector<std::string> bad = {
      "",       "gpu",      "CPU",    "Cuda",   "cuda:",      "cuda:-1", "cuda:+1",
      "cuda: 1", "cuda:1x", "cuda:a", "cuda0", "cuda:1:2",   " cpu",    "cpu ",
      "tpu",    "cuda:12345678901234567890", std::string("cpu\0", 4)};
  for (const std::string& device : bad) {
    std::string note = "stale";
    auto backend = CreateBackend(device, &note);
    ASSERT_FALSE(backend.ok()) << "\"" << device << "\"";
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument)
        << "\"" << device << "\": " << backend.status();
    EXPECT_NE(backend.status().message().find("cpu, auto, cuda or cuda:N"), std::string::npos)
        << backend.status();
    EXPECT_EQ(note, "");
  }
}

// The count is what CreateBackend acts on: every ordinal below it opens, the first one at
// it does not (0 devices without CUDA, or on the build machines' CUDA build with no GPU).
TEST(BackendFactoryTest, DeviceCountBoundsTheOrdinalsThatOpen) {
  const int count = CudaDeviceCount();
  if (!BuiltWithCuda()) {
    EXPECT_EQ(count, 0);
  }
  for (int i = 0; i < count; ++i) {
    auto backend = CreateBackend("cuda:" + std::to_string(i), nullptr);
    EXPECT_TRUE(backend.ok()) << i << ": " << backend.status();
  }
  auto beyond = CreateBackend("cuda:" + std::to_string(count), nullptr);
  ASSERT_FALSE(beyond.ok()) << "cuda:" << count << " of " << count << " devices opened";
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kFailedPrecondition) << beyond.status();
  // "cuda" alone is device 0: it opens exactly when there is one.
  EXPECT_EQ(CreateBackend("cuda", nullptr).ok(), count > 0);
}

}  // namespace
}  // namespace pstrain
