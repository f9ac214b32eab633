#include "common/training/strategy_kind.h"

#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(StrategyKindTest, EveryKindParsesBackFromItsName) {
  for (StrategyKind kind : {StrategyKind::kDefault, StrategyKind::kMirrored,
                            StrategyKind::kMultiWorkerMirrored, StrategyKind::kParameterServer}) {
    absl::StatusOr<StrategyKind> parsed = ParseStrategyKind(StrategyKindName(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(StrategyKindName(StrategyKind::kMultiWorkerMirrored), "multi_worker_mirrored");
}

TEST(StrategyKindTest, AnUnknownOrEmptyNameIsRefusedInOneLine) {
  for (const std::string name : {"central_storage", "", "Mirrored", "mirrored "}) {
    absl::StatusOr<StrategyKind> parsed = ParseStrategyKind(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(parsed.status().message());
    EXPECT_NE(message.find("strategy \"" + name + "\" is not one of default, mirrored"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace pstrain
