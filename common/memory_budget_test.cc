#include "common/memory_budget.h"

#include <limits>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(MemoryBudgetTest, ParsesSizesAndPercentagesAndRefusesTheRest) {
  EXPECT_EQ(ParseMemorySize("16G")->bytes, int64_t{16} << 30);
  EXPECT_EQ(ParseMemorySize("512m")->bytes, int64_t{512} << 20);
  EXPECT_EQ(ParseMemorySize("1048576")->bytes, 1048576);
  EXPECT_EQ(ParseMemorySize("2T")->bytes, int64_t{2} << 40);
  EXPECT_EQ(ParseMemorySize("80%")->percent, 80.0);
  for (const char* bad : {"", "0", "-1G", "12X", "G", "0%", "101%", "nan%", "9999999999T",
                          "9223372036854775808"}) {
    absl::StatusOr<MemorySize> size = ParseMemorySize(bad);
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  std::string error;
  MemorySize size;
  EXPECT_FALSE(AbslParseFlag("lots", &size, &error));
  EXPECT_NE(error.find("\"lots\""), std::string::npos) << error;
  ASSERT_TRUE(AbslParseFlag("3G", &size, &error));
  EXPECT_EQ(AbslUnparseFlag(size), "3221225472");
}

TEST(MemoryBudgetTest, DefaultIsAShareOfTheMachineAndTheFlagWins) {
  const int64_t machine = MachineMemoryBytes();
  EXPECT_GT(machine, 0);
  EXPECT_EQ(MemoryBudgetBytes(), static_cast<int64_t>(static_cast<double>(machine) * 0.8));
  absl::SetFlag(&FLAGS_max_memory, *ParseMemorySize("1G"));
  EXPECT_EQ(MemoryBudgetBytes(), int64_t{1} << 30);
  absl::Status over = CheckMemoryBudget(int64_t{3} << 30, "layer dense (Dense)");
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.message(),
            "layer dense (Dense) needs 3.0 GiB, more than the memory budget of 1.0 GiB "
            "(--max_memory)");
  EXPECT_TRUE(CheckMemoryBudget(int64_t{1} << 30, "x").ok());
  EXPECT_FALSE(CheckMemoryBudget(-1, "an overflowing size").ok());
  absl::SetFlag(&FLAGS_max_memory, *ParseMemorySize("80%"));
}

TEST(MemoryBudgetTest, SizesSaturateInsteadOfOverflowing) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(SaturatingMul(int64_t{1} << 40, int64_t{1} << 40), kMax);
  EXPECT_EQ(SaturatingMul(3, 4), 12);
  EXPECT_EQ(SaturatingMul(-1, 4), kMax);
  EXPECT_EQ(SaturatingAdd(kMax - 1, 2), kMax);
  EXPECT_EQ(SaturatingAdd(2, 3), 5);
  EXPECT_EQ(FormatBytes(kMax), "more than 8 EiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
}

TEST(MemoryLedgerTest, ChargesUpToTheLimitAndRefusesAtOnceBeyondIt) {
  MemoryLedger ledger(1000, "the test's buffers");
  absl::StatusOr<MemoryLedger::Charge> a = ledger.Reserve(600, "a");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<MemoryLedger::Charge> b = ledger.Reserve(600, "stream b");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(b.status().message(),
            "stream b needs 600 bytes, but only 400 bytes of the test's buffers (1000 bytes) "
            "are free; try again later or with less");
  EXPECT_FALSE(ledger.Reserve(-1, "an overflowed size").ok());
  EXPECT_EQ(ledger.in_use(), 600);
  {
    MemoryLedger::Charge moved = *std::move(a);
    EXPECT_EQ(moved.bytes(), 600);
    EXPECT_EQ(ledger.in_use(), 600);
  }
  EXPECT_EQ(ledger.in_use(), 0);
  EXPECT_TRUE(ledger.Reserve(1000, "all of it").ok());
  EXPECT_EQ(ledger.in_use(), 0);
  EXPECT_EQ(ledger.peak(), 1000);
  EXPECT_EQ(ledger.refused(), 2);
}

}  // namespace
}  // namespace pstrain
