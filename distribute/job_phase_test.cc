#include "distribute/job_phase.h"

#include <string>

#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"

namespace pstrain::distribute {
namespace {

constexpr JobPhase kEvery[] = {JobPhase::kWaitingForTasks, JobPhase::kRestoring,
                               JobPhase::kTraining,        JobPhase::kRecovering,
                               JobPhase::kDone,            JobPhase::kFailed};

TEST(JobPhaseTest, EveryPhaseGoesOverTheWireAndBack) {
  for (JobPhase phase : kEvery) {
    ChiefStatusResponse response;
    SetPhase(phase, &response);
    EXPECT_NE(response.phase(), ChiefStatusResponse::PHASE_UNSPECIFIED) << JobPhaseName(phase);
    EXPECT_EQ(response.phase_name(), JobPhaseName(phase));
    ChiefStatusResponse received;
    ASSERT_TRUE(received.ParseFromString(response.SerializeAsString()));
    absl::StatusOr<JobPhase> read = PhaseOf(received);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(*read, phase);
  }
  EXPECT_EQ(JobPhaseName(JobPhase::kWaitingForTasks), "waiting_for_tasks");
  EXPECT_TRUE(IsFinal(JobPhase::kDone));
  EXPECT_TRUE(IsFinal(JobPhase::kFailed));
  EXPECT_FALSE(IsFinal(JobPhase::kRecovering));
}

// A chief from before the enum sent the phase as a string in field 1 only.
TEST(JobPhaseTest, AnOlderChiefsPhaseIsReadFromItsName) {
  ChiefStatusResponse old;
  old.set_phase_name("recovering");
  old.set_epoch(3);
  ChiefStatusResponse received;
  ASSERT_TRUE(received.ParseFromString(old.SerializeAsString()));
  EXPECT_EQ(*PhaseOf(received), JobPhase::kRecovering);
}

// A reader from before the enum finds the phase where it always was: field 1, a string
// (read here as the unknown fields of a message that has none).
TEST(JobPhaseTest, AnOlderReaderFindsThePhaseNameInFieldOne) {
  ChiefStatusResponse response;
  SetPhase(JobPhase::kDone, &response);
  ChiefStatusRequest knows_nothing;
  ASSERT_TRUE(knows_nothing.ParseFromString(response.SerializeAsString()));
  const google::protobuf::UnknownFieldSet& fields =
      knows_nothing.GetReflection()->GetUnknownFields(knows_nothing);
  bool found = false;
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() != 1) continue;
    ASSERT_EQ(fields.field(i).type(), google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED);
    EXPECT_EQ(fields.field(i).length_delimited(), "done");
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(JobPhaseTest, NoPhaseOrAnUnknownOneIsAnError) {
  ChiefStatusResponse none;
  EXPECT_EQ(PhaseOf(none).status().code(), absl::StatusCode::kInvalidArgument);
  ChiefStatusResponse odd;
  odd.set_phase_name("paused");
  absl::Status status = PhaseOf(odd).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("\"paused\""), std::string::npos) << status;
  ChiefStatusResponse newer;
  newer.set_phase(static_cast<ChiefStatusResponse::Phase>(42));
  newer.set_phase_name("draining");
  status = PhaseOf(newer).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("42"), std::string::npos) << status;
}

}  // namespace
}  // namespace pstrain::distribute
