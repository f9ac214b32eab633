#include "ps_server/sync_aggregator.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace pstrain {
namespace {

// Whether sum + g stays finite in every element (neither holds a NaN or an infinity).
bool SumStaysFinite(absl::Span<const float> sum, absl::Span<const float> g) {
  bool finite = true;
  for (size_t k = 0; k < g.size(); ++k) finite &= std::fabs(sum[k] + g[k]) <= FLT_MAX;
  return finite;
}

}  // namespace

void SyncAggregator::Pending::Clear() {
  std::fill(sum.begin(), sum.end(), 0.0f);
  count = 0;
}

int SyncAggregator::LiveReplicas(const PushContext& context) {
  if (context.worker.empty()) return replicas_to_aggregate_;
  absl::MutexLock lock(&progress_mu_);
  const absl::Time now = absl::Now();
  last_push_[context.worker] = now;
  int silent = 0;
  for (const auto& [worker, last_push] : last_push_) {
    if (now - last_push >= timeout_) ++silent;
  }
  const int replicas = std::max(1, replicas_to_aggregate_ - silent);
  if (replicas < replicas_to_aggregate_ && !logged_shrink_.exchange(true)) {
    LogInfo(absl::StrCat("sync: ", silent, " worker(s) silent for ",
                         absl::FormatDuration(timeout_), "; aggregating ", replicas,
                         " gradients until they push again (logged once)"));
  }
  return replicas;
}

void SyncAggregator::DropNonFinite(const std::string& what) {
  ++nonfinite_dropped_;
  if (!logged_nonfinite_.exchange(true)) LogError(absl::StrCat("sync: dropped ", what));
}

void SyncAggregator::ApplyPending(Variable& v) {
  Pending& pending = v.pending();
  ++(pending.count == replicas_to_aggregate_ ? full_ : partial_);
  aggregated_ += pending.count;
  if (pending.count > 1) {
    const float scale = 1.0f / static_cast<float>(pending.count);
    for (float& x : pending.sum) x *= scale;
  }
  if (!v.ApplyMean(pending.sum)) {
    // The pushes that made this aggregate were accepted; its update is dropped, counted.
    DropNonFinite(
        "an aggregate update that overflows a float (a value or an optimizer slot would not "
        "be finite; logged once, counted in psctl ps)");
  }
  pending.Clear();
  v.BumpVersion();
}

void SyncAggregator::Push(const PushContext& context, absl::Span<Variable* const> variables,
                          absl::Span<const NamedTensor> gradients,
                          absl::Span<const int64_t> versions) {
  const int replicas = LiveReplicas(context);
  const absl::Time deadline = absl::Now() + timeout_;
  std::vector<size_t> joined;
  for (size_t i = 0; i < variables.size(); ++i) {
    Variable& v = *variables[i];
    absl::MutexLock lock(&v.mu());
    if (versions[i] != v.version()) {
      // Computed at another version (older, or from before a ps restart): the aggregate
      // it belonged to is gone, as SyncReplicasOptimizer drops stale gradients.
      ++stale_;
      continue;
    }
    absl::Span<const float> g = gradients[i].tensor.values();
    Pending& pending = v.pending();
    if (pending.sum.size() != g.size()) pending.sum.assign(g.size(), 0.0f);
    if (!SumStaysFinite(pending.sum, g)) {
      // Finite gradients whose sum overflows a float: this one stays out of the aggregate.
      DropNonFinite(absl::StrCat("a gradient for \"", gradients[i].name,
                                 "\": its sum with the others overflows a float (logged once)"));
      continue;
    }
    for (size_t k = 0; k < g.size(); ++k) pending.sum[k] += g[k];
    if (++pending.count >= replicas) {
      ApplyPending(v);
    } else {
      joined.push_back(i);
    }
  }
  if (!joined.empty()) ++waits_;
  bool timed_out = false;
  for (size_t i : joined) {
    Variable& v = *variables[i];
    const int64_t version = versions[i];
    absl::MutexLock lock(&v.mu());
    auto advanced = [&v, version]() { return v.version() > version; };
    if (v.mu().AwaitWithDeadline(absl::Condition(&advanced), deadline)) continue;
    if (!timed_out) ++timeouts_;  // once per push, not per variable
    timed_out = true;
    // Some replica never pushed (a straggler, an uneven last batch): apply what arrived.
    if (v.version() == version && v.pending().count > 0) ApplyPending(v);
    if (!logged_timeout_.exchange(true)) {
      LogInfo(absl::StrCat("sync: ", gradients[i].name, " waited ",
                           absl::FormatDuration(timeout_), " for ", replicas_to_aggregate_,
                           " gradients and applied the ones that arrived (logged once)"));
    }
  }
}

}  // namespace pstrain
