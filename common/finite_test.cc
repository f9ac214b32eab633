#include "common/finite.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(FiniteTest, FindsTheFirstNanOrInfinityAnywhere) {
  std::vector<float> values(1000, 1.5f);
  EXPECT_EQ(FirstNonFinite(values), -1);
  // Block edges and the tail: every position is found.
  for (size_t at : {size_t{0}, size_t{255}, size_t{256}, size_t{511}, size_t{999}}) {
    std::vector<float> v = values;
    v[at] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(FirstNonFinite(v), static_cast<int64_t>(at)) << at;
    v[at] = -std::numeric_limits<float>::infinity();
    EXPECT_EQ(FirstNonFinite(v), static_cast<int64_t>(at)) << at;
  }
  values[700] = std::numeric_limits<float>::infinity();
  values[300] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(FirstNonFinite(values), 300);
}

TEST(FiniteTest, LargestAndSubnormalValuesAreFinite) {
  std::vector<float> values = {std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min(), 0.0f, -0.0f};
  EXPECT_EQ(FirstNonFinite(values), -1);
  EXPECT_EQ(FirstNonFinite({}), -1);
}

TEST(FiniteTest, CheckFiniteNamesTheValueAndTheElement) {
  std::vector<float> values = {1, 2, std::numeric_limits<float>::infinity(), 4};
  absl::Status status = CheckFinite(values, "gradient for \"w\"");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "gradient for \"w\" holds a non-finite value (inf) at element 2 of 4");
  EXPECT_TRUE(CheckFinite({1.0f, 2.0f}, "x").ok());
}

}  // namespace
}  // namespace pstrain
