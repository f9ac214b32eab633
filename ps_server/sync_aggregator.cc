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

// Adds dense gradient g to `pending`, the rows summed so far folded in first; false (and
// the sum unchanged) when a sum would overflow.
bool AddDense(SyncAggregator::Pending& pending, absl::Span<const float> g) {
  if (!pending.dense) {
    // Zeros (Clear keeps them so), or not made yet.
    if (pending.sum.size() != g.size()) pending.sum.assign(g.size(), 0.0f);
    for (size_t i = 0; i < pending.rows.size(); ++i) {
      std::copy_n(pending.row_sums.data() + i * pending.row_width, pending.row_width,
                  pending.sum.data() + pending.rows[i] * pending.row_width);
    }
    // The rows now live in `sum`: their own copy goes, so the aggregate holds one table.
    std::vector<int64_t>().swap(pending.rows);
    std::vector<float>().swap(pending.row_sums);
    pending.dense = true;
  }
  if (!SumStaysFinite(pending.sum, g)) return false;
  for (size_t k = 0; k < g.size(); ++k) pending.sum[k] += g[k];
  return true;
}

// Adds row gradient g to `pending` row by row (into the dense sum once there is one);
// false (and the sum unchanged) when a sum would overflow. Rows summed by more than one
// pusher add in arrival order, as the dense sum adds them.
bool AddRows(SyncAggregator::Pending& pending, const SyncAggregator::RowGradient& g) {
  const size_t width = static_cast<size_t>(g.width);
  auto row = [width](auto* base, size_t i) { return absl::MakeSpan(base + i * width, width); };
  if (pending.dense) {
    for (size_t i = 0; i < g.rows.size(); ++i) {
      if (!SumStaysFinite(row(pending.sum.data(), g.rows[i]), row(g.values.data(), i))) {
        return false;
      }
    }
    for (size_t i = 0; i < g.rows.size(); ++i) {
      absl::Span<float> to = row(pending.sum.data(), g.rows[i]);
      absl::Span<const float> from = row(g.values.data(), i);
      for (size_t k = 0; k < width; ++k) to[k] += from[k];
    }
    return true;
  }
  if (pending.rows.empty()) {
    pending.rows.assign(g.rows.begin(), g.rows.end());
    pending.row_sums.assign(g.values.begin(), g.values.end());
    pending.row_width = g.width;
    return true;
  }
  // Both lists ascending: the rows in both are checked and counted, then the two merged
  // in place from the back (the aggregate grows to the union once, never copied whole).
  size_t shared = 0;
  for (size_t i = 0, j = 0; i < pending.rows.size() && j < g.rows.size();) {
    if (pending.rows[i] < g.rows[j]) {
      ++i;
    } else if (g.rows[j] < pending.rows[i]) {
      ++j;
    } else {
      if (!SumStaysFinite(row(pending.row_sums.data(), i), row(g.values.data(), j))) {
        return false;
      }
      ++shared;
      ++i;
      ++j;
    }
  }
  size_t i = pending.rows.size();
  size_t j = g.rows.size();
  const size_t total = i + j - shared;
  pending.rows.reserve(total);
  pending.row_sums.reserve(total * width);
  pending.rows.resize(total);
  pending.row_sums.resize(total * width);
  for (size_t out = total; out-- > 0;) {
    // Row i-1 of the aggregate and row j-1 of the push, the larger first.
    const bool from_pending = i > 0 && (j == 0 || pending.rows[i - 1] >= g.rows[j - 1]);
    const bool from_push = j > 0 && (i == 0 || g.rows[j - 1] >= pending.rows[i - 1]);
    absl::Span<float> to = row(pending.row_sums.data(), out);
    if (from_pending) {
      // out >= i - 1: moving a row up never overwrites one still to be read.
      absl::Span<const float> from = row(pending.row_sums.data(), i - 1);
      std::copy_backward(from.begin(), from.end(), to.end());
      pending.rows[out] = pending.rows[i - 1];
      --i;
    }
    if (from_push) {
      absl::Span<const float> from = row(g.values.data(), j - 1);
      if (from_pending) {
        for (size_t k = 0; k < width; ++k) to[k] += from[k];
      } else {
        std::copy(from.begin(), from.end(), to.begin());
        pending.rows[out] = g.rows[j - 1];
      }
      --j;
    }
  }
  return true;
}

}  // namespace

void SyncAggregator::Pending::Clear() {
  // A dense sum keeps its memory for the next aggregate, as zeros; so do the rows.
  if (dense) std::fill(sum.begin(), sum.end(), 0.0f);
  dense = false;
  rows.clear();
  row_sums.clear();
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
  std::vector<float>& sum = pending.dense ? pending.sum : pending.row_sums;
  if (pending.count > 1) {
    const float scale = 1.0f / static_cast<float>(pending.count);
    for (float& x : sum) x *= scale;
  }
  const bool applied =
      pending.dense ? v.ApplyMean(pending.sum) : v.ApplyRowsMean(pending.rows, pending.row_sums);
  if (!applied) {
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
  Aggregate(
      context, variables, versions,
      [gradients](size_t i) -> const std::string& { return gradients[i].name; },
      [gradients](size_t i, Pending& pending) {
        return AddDense(pending, gradients[i].tensor.values());
      });
}

void SyncAggregator::PushRows(const PushContext& context, absl::Span<Variable* const> variables,
                              absl::Span<const RowGradient> gradients,
                              absl::Span<const int64_t> versions) {
  Aggregate(
      context, variables, versions,
      [gradients](size_t i) -> const std::string& { return gradients[i].name; },
      [gradients](size_t i, Pending& pending) { return AddRows(pending, gradients[i]); });
}

void SyncAggregator::Aggregate(const PushContext& context, absl::Span<Variable* const> variables,
                               absl::Span<const int64_t> versions,
                               absl::FunctionRef<const std::string&(size_t)> names,
                               absl::FunctionRef<bool(size_t, Pending&)> add) {
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
    Pending& pending = v.pending();
    if (!add(i, pending)) {
      // Finite gradients whose sum overflows a float: this one stays out of the aggregate.
      DropNonFinite(absl::StrCat("a gradient for \"", names(i),
                                 "\": its sum with the others overflows a float (logged once)"));
      continue;
    }
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
      LogInfo(absl::StrCat("sync: ", names(i), " waited ",
                           absl::FormatDuration(timeout_), " for ", replicas_to_aggregate_,
                           " gradients and applied the ones that arrived (logged once)"));
    }
  }
}

}  // namespace pstrain
