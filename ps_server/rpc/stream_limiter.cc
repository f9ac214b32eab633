#include "ps_server/rpc/stream_limiter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace pstrain {

StreamLimiter::StreamLimiter(StreamLimits limits)
    : limits_(limits), watchdog_([this] { Watch(); }) {}

StreamLimiter::~StreamLimiter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  watchdog_.join();
}

std::string StreamLimiter::PeerHost(const std::string& peer) {
  // "ipv4:1.2.3.4:5", "ipv6:[::1]:5", "unix:/path": drop a trailing ":port".
  const size_t colon = peer.rfind(':');
  const size_t bracket = peer.rfind(']');
  if (colon == std::string::npos || colon <= peer.find(':') ||
      (bracket != std::string::npos && colon < bracket)) {
    return peer;
  }
  return peer.substr(0, colon);
}

absl::StatusOr<std::unique_ptr<StreamLimiter::Lease>> StreamLimiter::Open(
    grpc::ServerContext* context, std::string owner) {
  const std::string peer = owner.empty() ? PeerHost(context->peer()) : std::move(owner);
  absl::MutexLock lock(&mu_);
  int& open = per_peer_[peer];
  if (open >= limits_.max_streams_per_peer) {
    ++refused_;
    return absl::ResourceExhaustedError(
        absl::StrCat(peer, " already holds ", open, " open streams (the most one caller may)"));
  }
  ++open;
  const uint64_t id = next_id_++;
  streams_.emplace(id, Stream{context, peer, absl::Now()});
  return std::unique_ptr<Lease>(new Lease(this, id));
}

int StreamLimiter::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(streams_.size());
}

void StreamLimiter::Close(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  auto peer = per_peer_.find(it->second.peer);
  if (peer != per_peer_.end() && --peer->second <= 0) per_peer_.erase(peer);
  streams_.erase(it);
}

StreamLimiter::Lease::~Lease() { limiter_->Close(id_); }

void StreamLimiter::Lease::StartRead() {
  absl::MutexLock lock(&limiter_->mu_);
  auto it = limiter_->streams_.find(id_);
  if (it != limiter_->streams_.end()) it->second.reading_since = absl::Now();
}

void StreamLimiter::Lease::EndRead() {
  absl::MutexLock lock(&limiter_->mu_);
  auto it = limiter_->streams_.find(id_);
  if (it != limiter_->streams_.end()) it->second.reading_since = absl::InfiniteFuture();
}

bool StreamLimiter::Lease::cancelled(std::string* why) const {
  absl::MutexLock lock(&limiter_->mu_);
  auto it = limiter_->streams_.find(id_);
  if (it == limiter_->streams_.end() || it->second.cancelled_because.empty()) return false;
  if (why != nullptr) *why = it->second.cancelled_because;
  return true;
}

void StreamLimiter::CancelExpired(absl::Time now) {
  for (auto& [id, stream] : streams_) {
    if (!stream.cancelled_because.empty()) continue;
    if (now - stream.opened >= limits_.max_duration) {
      stream.cancelled_because = absl::StrCat("open for longer than ",
                                              absl::FormatDuration(limits_.max_duration));
    } else if (now - stream.reading_since >= limits_.idle_timeout) {
      stream.cancelled_because = absl::StrCat("no message for ",
                                              absl::FormatDuration(limits_.idle_timeout));
    } else {
      continue;
    }
    ++cancelled_;
    LogInfo(absl::StrCat("cancelled a stream from ", stream.peer, ": ",
                         stream.cancelled_because));
    // Under mu_: the stream is registered, so its context is alive.
    stream.context->TryCancel();
  }
}

void StreamLimiter::Watch() {
  // Checks a few times per shortest limit, at most every second.
  const absl::Duration period = std::clamp(
      std::min(limits_.idle_timeout, limits_.max_duration) / 4, absl::Milliseconds(5),
      absl::Seconds(1));
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping), period)) {
    CancelExpired(absl::Now());
  }
}

}  // namespace pstrain
