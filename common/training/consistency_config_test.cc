#include "common/training/consistency_config.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

// What the chief gives every ps: the job's value read, then resolved for `num_workers`.
absl::StatusOr<ConsistencyConfig> ConsistencyFor(const nlohmann::json& value, int num_workers) {
  absl::StatusOr<ConsistencyConfig> config = ConsistencyConfigFromJson(value);
  if (!config.ok()) return config.status();
  return ResolveConsistency(*config, num_workers);
}

TEST(ConsistencyConfigFromJsonTest, DefaultsToAsyncAndResolvesDefaults) {
  auto config = ConsistencyFor(nlohmann::json(), 3);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->mode(), CONSISTENCY_ASYNC);
  config = ConsistencyFor(nlohmann::json::parse(R"({"mode": "sync"})"), 3);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->replicas_to_aggregate(), 3);
  EXPECT_EQ(config->timeout_ms(), 5000);
  config = ConsistencyFor(
      nlohmann::json::parse(R"({"mode": "bounded_staleness", "staleness": 4})"), 3);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->staleness(), 4);
}

TEST(ConsistencyConfigFromJsonTest, BadValuesAreOneLineInvalidArgument) {
  for (const char* bad : {R"("sync")", R"({"mode": "lockstep"})", R"({"staleness": -1})",
                          R"({"mode": "sync", "replicas_to_aggregate": 0})",
                          R"({"mode": "sync", "replicas_to_aggregate": 4})",
                          R"({"timeout_ms": 0})", R"({"timeout_ms": "5s"})", R"({"k": 2})"}) {
    auto config = ConsistencyFor(nlohmann::json::parse(bad), 3);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(config.status().message().find('\n'), absl::string_view::npos) << bad;
  }
}

TEST(ConsistencyConfigFromJsonTest, AnUnknownModeIsNamedInTheError) {
  auto config = ConsistencyConfigFromJson(nlohmann::json::parse(R"({"mode": "lockstep"})"));
  EXPECT_NE(config.status().message().find("\"lockstep\""), absl::string_view::npos)
      << config.status();
  EXPECT_EQ(ConsistencyModeName(static_cast<ConsistencyMode>(7)), "unknown mode 7");
}

TEST(ConsistencyConfigFromJsonTest, ToJsonReadsBackTheSameConfig) {
  for (const char* text :
       {R"(null)", R"({"mode": "sync", "replicas_to_aggregate": 2, "timeout_ms": 300})",
        R"({"mode": "bounded_staleness", "staleness": 0})", R"({"mode": "sync"})"}) {
    auto config = ConsistencyConfigFromJson(nlohmann::json::parse(text));
    ASSERT_TRUE(config.ok()) << config.status();
    auto back = ConsistencyConfigFromJson(ConsistencyConfigToJson(*config));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->SerializeAsString(), config->SerializeAsString()) << text;
  }
}

TEST(ConsistencyConfigFromJsonTest, DescribesTheResolvedMode) {
  auto sync = ConsistencyFor(nlohmann::json::parse(R"({"mode": "sync"})"), 2);
  ASSERT_TRUE(sync.ok());
  EXPECT_EQ(DescribeConsistency(*sync), "sync, aggregating 2 gradients, timeout 5000 ms");
  auto bounded = ConsistencyFor(
      nlohmann::json::parse(R"({"mode": "bounded_staleness", "staleness": 1})"), 2);
  ASSERT_TRUE(bounded.ok());
  EXPECT_EQ(DescribeConsistency(*bounded), "bounded_staleness, staleness 1, timeout 5000 ms");
}

}  // namespace
}  // namespace pstrain
