#include "ps_server/request_log.h"

namespace pstrain {

RequestLog::Claim RequestLog::Begin(uint64_t id, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto settled = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = states_.find(id);
    return it == states_.end() || it->second == State::kApplied;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&settled), wait)) return Claim::kBusy;
  auto it = states_.find(id);
  if (it != states_.end()) return Claim::kDuplicate;
  states_.emplace(id, State::kApplying);
  return Claim::kApply;
}

void RequestLog::Finish(uint64_t id, bool applied) {
  absl::MutexLock lock(&mu_);
  auto it = states_.find(id);
  if (it == states_.end() || it->second != State::kApplying) return;
  if (!applied) {
    states_.erase(it);
    return;
  }
  it->second = State::kApplied;
  order_.push_back(id);
  while (order_.size() > capacity_) {
    states_.erase(order_.front());
    order_.pop_front();
  }
}

}  // namespace pstrain
