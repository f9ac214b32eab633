#include "distribute/failure.h"

#include "absl/strings/str_cat.h"

namespace pstrain::distribute {

const char* FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kNone:
      return "none";
    case FailureKind::kFunctionError:
      return "function error";
    case FailureKind::kWorkerLost:
      return "worker lost";
    case FailureKind::kPsFailed:
      return "ps failed";
  }
  return "unknown";
}

FailureKind ClassifyFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return FailureKind::kNone;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
      return FailureKind::kWorkerLost;
    case absl::StatusCode::kAborted:
      return FailureKind::kPsFailed;
    default:
      return FailureKind::kFunctionError;
  }
}

absl::Status PsFailureOnWorker(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return absl::AbortedError(absl::StrCat("a ps failed: ", status.message()));
    default:
      return status;
  }
}

}  // namespace pstrain::distribute
