#include "ps_server/staleness_gate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace pstrain {

void StalenessGate::Wait(const PushContext& context) {
  if (context.worker.empty()) return;
  absl::MutexLock lock(&mu_);
  // Recorded before waiting: this worker is at least this far, which only ever lets
  // others proceed sooner. A worker whose latest push is of a later epoch is done with
  // this one and is skipped, so a finished worker never holds the others back.
  const absl::Time now = absl::Now();
  progress_[context.worker] = {context.epoch, context.step, now};
  auto may_proceed = [this, &context, now]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return LeadOverSlowest(context, now) <= staleness_;
  };
  const bool must_wait = !may_proceed();
  if (must_wait) ++waits_;
  const bool caught_up =
      !must_wait || mu_.AwaitWithTimeout(absl::Condition(&may_proceed), timeout_);
  // The lead this push is applied with, over the workers the wait counted as live, so the
  // status shows whether the bound held (a timed-out wait shows here as a larger lead).
  const int64_t lead = LeadOverSlowest(context, now);
  if (lead > max_lead_.load()) max_lead_ = lead;
  if (caught_up) return;
  ++timeouts_;
  if (!logged_timeout_.exchange(true)) {
    LogInfo(absl::StrCat("bounded staleness: ", context.worker, " at epoch ", context.epoch,
                         " step ", context.step, " waited ", absl::FormatDuration(timeout_),
                         " for slower workers and proceeds (logged once)"));
  }
}

int64_t StalenessGate::LeadOverSlowest(const PushContext& context, absl::Time now) const {
  int64_t lead = 0;
  for (const auto& [worker, progress] : progress_) {
    if (worker == context.worker || progress.epoch != context.epoch) continue;
    if (now - progress.last_push >= timeout_) continue;  // not live
    lead = std::max(lead, context.step - progress.step);
  }
  return lead;
}

}  // namespace pstrain
