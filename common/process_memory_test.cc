#include "common/process_memory.h"

#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ProcessMemoryTest, ReadsVmRssAndVmHwmInBytes) {
  auto memory = ParseProcessMemory(
      "Name:\tps_server\nVmPeak:\t  900000 kB\nVmHWM:\t    5120 kB\nVmRSS:\t    4096 kB\n");
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->resident_bytes, 4096 * 1024);
  EXPECT_EQ(memory->peak_resident_bytes, 5120 * 1024);
}

TEST(ProcessMemoryTest, AMissingOrMalformedLineIsAnError) {
  for (const char* text : {"VmRSS:\t4 kB\n", "VmHWM:\t4 kB\nVmRSS:\tmany kB\n",
                           "VmHWM:\t4 kB\nVmRSS:\t-4 kB\n", "VmHWM:\t4 MB\nVmRSS:\t4 kB\n", ""}) {
    EXPECT_EQ(ParseProcessMemory(text).status().code(), absl::StatusCode::kInvalidArgument)
        << text;
  }
}

// This process holds this vector: its resident memory grows, and the peak is never below
// what it holds.
TEST(ProcessMemoryTest, ThisProcessHoldsWhatItTouched) {
  auto before = ReadProcessMemory();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->resident_bytes, 0);
  std::vector<char> held(64 << 20, 1);
  auto after = ReadProcessMemory();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->resident_bytes, before->resident_bytes + (48 << 20)) << held[12345];
  EXPECT_GE(after->peak_resident_bytes, after->resident_bytes);
}

}  // namespace
}  // namespace pstrain
