#include "ps_server/consistency.h"

#include <limits>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ValidateConsistencyTest, AcceptsResolvedConfigs) {
  ConsistencyConfig config;
  EXPECT_TRUE(ValidateConsistency(config).ok());  // async, nothing else needed
  config.set_mode(CONSISTENCY_BOUNDED_STALENESS);
  config.set_staleness(4);
  config.set_timeout_ms(5000);
  EXPECT_TRUE(ValidateConsistency(config).ok());
  config.set_mode(CONSISTENCY_SYNC);
  config.set_replicas_to_aggregate(3);
  EXPECT_TRUE(ValidateConsistency(config).ok());
}

TEST(ValidateConsistencyTest, RefusesWhatAPsCannotRun) {
  ConsistencyConfig unknown;
  unknown.set_mode(static_cast<ConsistencyMode>(7));  // from a newer peer
  EXPECT_EQ(ValidateConsistency(unknown).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ValidateConsistency(unknown).message().find("7"), absl::string_view::npos);
  ConsistencyConfig sync;
  sync.set_mode(CONSISTENCY_SYNC);
  sync.set_timeout_ms(5000);
  sync.set_replicas_to_aggregate(0);  // unresolved
  EXPECT_EQ(ValidateConsistency(sync).code(), absl::StatusCode::kInvalidArgument);
  ConsistencyConfig no_timeout;
  no_timeout.set_mode(CONSISTENCY_BOUNDED_STALENESS);
  EXPECT_EQ(ValidateConsistency(no_timeout).code(), absl::StatusCode::kInvalidArgument);
  // A wait of 2^63 ms would hold a server thread for ever.
  ConsistencyConfig endless = sync;
  endless.set_replicas_to_aggregate(2);
  endless.set_timeout_ms(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ValidateConsistency(endless).code(), absl::StatusCode::kInvalidArgument);
  endless.set_timeout_ms(kMaxConsistencyTimeoutMs);
  EXPECT_TRUE(ValidateConsistency(endless).ok());
}

}  // namespace
}  // namespace pstrain
