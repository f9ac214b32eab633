#include "common/rpc/replay_cache.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace pstrain {

ReplayCache::ReplayCache(absl::Duration max_skew, size_t capacity)
    : max_skew_micros_(absl::ToInt64Microseconds(max_skew)),
      capacity_(capacity > 0 ? capacity : 1),
      low_water_micros_(std::numeric_limits<int64_t>::min()) {}

absl::Status ReplayCache::Admit(int64_t time_micros, absl::string_view nonce, absl::Time now) {
  const int64_t now_micros = absl::ToUnixMicros(now);
  if (time_micros < now_micros - max_skew_micros_ || time_micros > now_micros + max_skew_micros_) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the call's time is ", (now_micros - time_micros) / 1000,
        " ms from this server's clock, more than the ", max_skew_micros_ / 1000000,
        " s allowed (a replayed call, or clocks out of step: run NTP on every host)"));
  }
  absl::MutexLock lock(&mu_);
  // Pairs whose time left the window are refused by the time alone.
  const int64_t window_start = now_micros - max_skew_micros_;
  while (!seen_.empty() && seen_.begin()->first < window_start) seen_.erase(seen_.begin());
  if (time_micros <= low_water_micros_) {
    return absl::UnauthenticatedError(
        "the call is older than the calls this server still remembers (a replayed call, or "
        "one held up on the wire)");
  }
  std::pair<int64_t, std::string> key(time_micros, std::string(nonce));
  if (seen_.contains(key)) {
    return absl::UnauthenticatedError("the call's nonce was seen before: a replayed call");
  }
  if (seen_.size() >= capacity_) {
    low_water_micros_ = seen_.begin()->first;
    seen_.erase(seen_.begin());
    if (time_micros <= low_water_micros_) {
      return absl::UnauthenticatedError(
          "the call is older than the calls this server still remembers (a replayed call, "
          "or one held up on the wire)");
    }
  }
  seen_.insert(std::move(key));
  return absl::OkStatus();
}

size_t ReplayCache::size() const {
  absl::MutexLock lock(&mu_);
  return seen_.size();
}

}  // namespace pstrain
