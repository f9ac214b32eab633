#include "ps_server/consistency.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

TEST(ConsistencyConfigFromJsonTest, DefaultsToAsyncAndResolvesDefaults) {
  auto config = ConsistencyConfigFromJson(nlohmann::json(), 3);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->mode(), "async");
  config = ConsistencyConfigFromJson(nlohmann::json::parse(R"({"mode": "sync"})"), 3);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->replicas_to_aggregate(), 3);
  EXPECT_EQ(config->timeout_ms(), 5000);
  config = ConsistencyConfigFromJson(
      nlohmann::json::parse(R"({"mode": "bounded_staleness", "staleness": 4})"), 3);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->staleness(), 4);
  EXPECT_TRUE(ValidateConsistency(*config).ok());
}

TEST(ConsistencyConfigFromJsonTest, BadValuesAreOneLineInvalidArgument) {
  for (const char* bad : {R"("sync")", R"({"mode": "lockstep"})", R"({"staleness": -1})",
                          R"({"mode": "sync", "replicas_to_aggregate": 0})",
                          R"({"mode": "sync", "replicas_to_aggregate": 4})",
                          R"({"timeout_ms": 0})", R"({"timeout_ms": "5s"})", R"({"k": 2})"}) {
    auto config = ConsistencyConfigFromJson(nlohmann::json::parse(bad), 3);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(config.status().message().find('\n'), absl::string_view::npos) << bad;
  }
  ConsistencyConfig unknown;
  unknown.set_mode("eventual");
  EXPECT_EQ(ValidateConsistency(unknown).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
