#include "distribute/watched_worker.h"

#include <utility>

#include "common/logging.h"

namespace pstrain::distribute {

absl::StatusOr<bool> WatchedWorker::Ready() {
  absl::StatusOr<bool> ready = worker_->Ready();
  if (ready.ok()) {
    // The index is the scheduler's, which the membership names: it cannot be unknown.
    if (absl::Status s = membership_->Heard({Role::kWorker, index_}); !s.ok())
      LogWarning(s.message());
  }
  return ready;
}

std::function<void(int, const absl::Status&)> ReportLostTo(
    Membership* membership, std::function<void(int, const absl::Status&)> then) {
  return [membership, then = std::move(then)](int w, const absl::Status& status) {
    if (absl::Status s = membership->ReportLost({Role::kWorker, w}, status); !s.ok()) {
      LogWarning(s.message());
    }
    if (then) then(w, status);
  };
}

}  // namespace pstrain::distribute
