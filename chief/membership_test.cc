#include "chief/membership.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// The rules themselves are tested in distribute/membership_test.cc; this is the chief's
// wire view of them.
TEST(ChiefMembershipTest, TaskStatesListEveryPsAndWorkerWithItsRegistration) {
  const ClusterSpec cluster = *ClusterSpec::Create(
      {{"chief", {"h:1"}}, {"ps", {"h:2", "h:3"}}, {"worker", {"h:4", "h:5"}}});
  Membership membership(cluster, ChiefMembershipOptions(absl::Seconds(5)));
  ASSERT_TRUE(membership.Register({Role::kWorker, 1}, "10.0.0.5:2222", 4).ok());
  EXPECT_EQ(membership.Register({Role::kChief, 0}, "h:1", 1).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<TaskState> states = TaskStates(membership);
  ASSERT_EQ(states.size(), 4u);
  EXPECT_EQ(states[0].task_type(), "ps");
  EXPECT_EQ(states[0].task_index(), 0);
  EXPECT_EQ(states[0].address(), "h:2");
  EXPECT_FALSE(states[0].registered());
  EXPECT_EQ(states[0].last_heartbeat_age_ms(), 0);
  EXPECT_EQ(states[3].task_type(), "worker");
  EXPECT_EQ(states[3].task_index(), 1);
  EXPECT_EQ(states[3].address(), "10.0.0.5:2222");
  EXPECT_TRUE(states[3].registered());
  EXPECT_GE(states[3].last_heartbeat_age_ms(), 0);
  EXPECT_LT(states[3].last_heartbeat_age_ms(), 5000);
}

}  // namespace
}  // namespace pstrain
