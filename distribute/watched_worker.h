#ifndef PSTRAIN_DISTRIBUTE_WATCHED_WORKER_H_
#define PSTRAIN_DISTRIBUTE_WATCHED_WORKER_H_

// Feeds Membership (distribute/membership.h) from what the closure scheduler learns of
// its workers anyway, so a user of the scheduler whose workers send no heartbeats (a
// custom loop) keeps the same membership the chief daemon keeps from its heartbeats: a
// Ready poll that the worker answers is a heartbeat (Heard), and a lost worker
// (ClosureSchedulerOptions::on_worker_lost, ReportLostTo) is reported lost. The worker is
// back once a poll answers again.
//
// Thread-safety: as the wrapped worker's; Membership is thread-safe.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "distribute/closure_scheduler.h"
#include "distribute/membership.h"

namespace pstrain::distribute {

class WatchedWorker : public ScheduledWorker {
 public:
  // `worker` and `membership` are not owned and must outlive this. The worker is
  // membership's task "worker" `index`.
  WatchedWorker(ScheduledWorker* worker, Membership* membership, int index)
      : worker_(worker), membership_(membership), index_(index) {}

  std::string name() const override { return worker_->name(); }
  // The wrapped worker's answer; one that came back (ready or not) is a heartbeat.
  absl::StatusOr<bool> Ready() override;

 private:
  ScheduledWorker* const worker_;   // Not owned.
  Membership* const membership_;    // Not owned.
  const int index_;
};

// An on_worker_lost for ClosureSchedulerOptions that reports worker `w` lost to
// `membership` (not owned), then calls `then` (may be empty).
std::function<void(int, const absl::Status&)> ReportLostTo(
    Membership* membership, std::function<void(int, const absl::Status&)> then = nullptr);

}  // namespace pstrain::distribute

#endif  // PSTRAIN_DISTRIBUTE_WATCHED_WORKER_H_
