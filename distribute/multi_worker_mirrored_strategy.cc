#include "distribute/multi_worker_mirrored_strategy.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain {

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(RingTransport* transport,
                                                         MultiWorkerMirroredOptions options)
    : options_(options), ring_(transport, options.ring) {
  ring_.set_timeout(std::max(options_.startup_timeout, options_.ring.timeout));
}

absl::Status MultiWorkerMirroredStrategy::Run(
    const std::function<absl::Status(int replica)>& step_fn) {
  return step_fn(ring_.rank());
}

absl::Status MultiWorkerMirroredStrategy::CrossWorkerSum(
    absl::Span<const absl::Span<float>> tensors) {
  absl::Status status =
      collective_ != nullptr ? collective_->AllReduceSum(tensors) : ring_.AllReduceSum(tensors);
  if (!started_) {
    // The workers have met: from now on a silent peer is a dead one.
    started_ = true;
    ring_.set_timeout(options_.ring.timeout);
    if (collective_ != nullptr) collective_->set_timeout(options_.ring.timeout);
  }
  return status;
}

absl::Status MultiWorkerMirroredStrategy::RingSumAtStartup(
    absl::Span<const absl::Span<float>> tensors) {
  return ring_.AllReduceSum(tensors);  // the ring's timeout is still the startup one
}

void MultiWorkerMirroredStrategy::UseCollective(
    std::unique_ptr<CrossWorkerCollective> collective) {
  collective_ = std::move(collective);
  if (collective_ != nullptr) {
    collective_->set_timeout(started_ ? options_.ring.timeout
                                      : std::max(options_.startup_timeout, options_.ring.timeout));
  }
}

absl::Status MultiWorkerMirroredStrategy::CheckInSync(
    absl::Span<const absl::Span<const float>> weights) {
  // FNV-1a over the bytes: any differing bit changes it (with overwhelming likelihood).
  uint32_t h = 2166136261u;
  for (const absl::Span<const float>& w : weights) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(w.data());
    for (size_t i = 0; i < w.size() * sizeof(float); ++i) h = (h ^ p[i]) * 16777619u;
  }
  const float lo = static_cast<float>(h & 0xffff), hi = static_cast<float>(h >> 16);
  std::vector<float> sums = {lo, hi};
  const absl::Status st = CrossWorkerSum({absl::MakeSpan(sums)});
  if (!st.ok()) return st;
  ++checks_;
  const float n = static_cast<float>(ring_.size());
  if (sums[0] != n * lo || sums[1] != n * hi) {
    return absl::FailedPreconditionError(absl::StrCat(
        "weights differ between workers at check ", checks_, " (worker ", ring_.rank(),
        " fingerprint ", h, ")"));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
