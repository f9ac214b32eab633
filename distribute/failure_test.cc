#include "distribute/failure.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace pstrain::distribute {
namespace {

TEST(FailureTest, EachCodeHasOneMeaning) {
  EXPECT_EQ(ClassifyFailure(absl::OkStatus()), FailureKind::kNone);
  EXPECT_EQ(ClassifyFailure(absl::UnavailableError("connection refused")),
            FailureKind::kWorkerLost);
  EXPECT_EQ(ClassifyFailure(absl::DeadlineExceededError("late")), FailureKind::kWorkerLost);
  EXPECT_EQ(ClassifyFailure(absl::CancelledError("server stopping")), FailureKind::kWorkerLost);
  EXPECT_EQ(ClassifyFailure(absl::AbortedError("a ps failed")), FailureKind::kPsFailed);
  EXPECT_EQ(ClassifyFailure(absl::InvalidArgumentError("bad")), FailureKind::kFunctionError);
  EXPECT_EQ(ClassifyFailure(absl::FailedPreconditionError("busy")),
            FailureKind::kFunctionError);
  EXPECT_EQ(ClassifyFailure(absl::PermissionDeniedError("no token")),
            FailureKind::kFunctionError);
  EXPECT_STREQ(FailureKindName(FailureKind::kPsFailed), "ps failed");
}

TEST(FailureTest, AWorkerReportsAFailedPsSoThatTheChiefDoesNotThinkItLost) {
  for (const absl::Status& from_ps :
       {absl::UnavailableError("ps task 1 (localhost:5): connection refused"),
        absl::DeadlineExceededError("ps task 1 (localhost:5): deadline"),
        absl::NotFoundError("ps task 1 (localhost:5): no variable dense/kernel"),
        absl::FailedPreconditionError("ps task 1 (localhost:5): no variables"),
        absl::CancelledError("ps task 1 (localhost:5): cancelled"),
        absl::AbortedError("ps task 1 (localhost:5): aborted")}) {
    const absl::Status reported = PsFailureOnWorker(from_ps);
    EXPECT_TRUE(absl::IsAborted(reported)) << reported;
    EXPECT_TRUE(absl::StrContains(reported.message(), "a ps failed: ps task 1 (localhost:5)"))
        << reported;
    EXPECT_EQ(ClassifyFailure(reported), FailureKind::kPsFailed);
  }
  // The function's own errors stay what they are.
  const absl::Status own = absl::InvalidArgumentError("labels out of range");
  EXPECT_EQ(PsFailureOnWorker(own), own);
  EXPECT_EQ(ClassifyFailure(PsFailureOnWorker(own)), FailureKind::kFunctionError);
  EXPECT_TRUE(PsFailureOnWorker(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace pstrain::distribute
