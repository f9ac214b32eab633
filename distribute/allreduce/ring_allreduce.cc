#include "distribute/allreduce/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Receives poll in slices this long so a failed send of ours is noticed quickly.
constexpr absl::Duration kPollSlice = absl::Milliseconds(50);

// Copies elements [begin, begin + out.size()) of the concatenation of `tensors` into
// `out` (to_fusion) or back from it.
void CopyRange(absl::Span<const absl::Span<float>> tensors, int64_t begin, absl::Span<float> out,
               bool to_fusion) {
  int64_t offset = 0;  // start of tensors[t] in the concatenation
  int64_t done = 0;
  for (const absl::Span<float>& t : tensors) {
    const int64_t size = static_cast<int64_t>(t.size());
    const int64_t lo = std::max(begin + done, offset);
    const int64_t hi = std::min<int64_t>(begin + static_cast<int64_t>(out.size()), offset + size);
    if (lo < hi) {
      float* fused = out.data() + (lo - begin);
      float* tensor = t.data() + (lo - offset);
      if (to_fusion) {
        std::memcpy(fused, tensor, sizeof(float) * (hi - lo));
      } else {
        std::memcpy(tensor, fused, sizeof(float) * (hi - lo));
      }
      done = hi - begin;
    }
    offset += size;
    if (offset >= begin + static_cast<int64_t>(out.size())) break;
  }
}

}  // namespace

RingAllReduce::RingAllReduce(RingTransport* transport, RingAllReduceOptions options)
    : transport_(transport), options_(options) {
  sender_ = std::thread([this] { SenderLoop(); });
}

RingAllReduce::~RingAllReduce() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  sender_.join();
}

void RingAllReduce::Send(const ChunkKey& key, absl::Span<const float> data) {
  PendingSend send{key, data, options_.timeout};
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(send));
}

absl::Status RingAllReduce::SendError() {
  absl::MutexLock lock(&mu_);
  return send_error_;
}

absl::Status RingAllReduce::Flush() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](RingAllReduce* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return (r->queue_.empty() && r->in_flight_ == 0) || !r->send_error_.ok();
      },
      this));
  return send_error_;
}

void RingAllReduce::DropSends() {
  absl::MutexLock lock(&mu_);
  queue_.clear();
  mu_.Await(absl::Condition(
      +[](RingAllReduce* r) ABSL_NO_THREAD_SAFETY_ANALYSIS { return r->in_flight_ == 0; }, this));
}

void RingAllReduce::SenderLoop() {
  while (true) {
    PendingSend send;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](RingAllReduce* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return r->stopping_ || !r->queue_.empty();
          },
          this));
      // Stopping: whatever is queued belongs to an abandoned collective.
      if (stopping_) return;
      send = std::move(queue_.front());
      queue_.pop_front();
      if (!send_error_.ok()) continue;  // the ring is broken: drop the rest
      ++in_flight_;
    }
    absl::Status st = transport_->SendToNext(send.key, send.data, send.timeout);
    absl::MutexLock lock(&mu_);
    --in_flight_;
    if (!st.ok() && send_error_.ok()) {
      send_error_ = absl::Status(
          st.code(), absl::StrCat("all-reduce ", send.key.step, ": sending to ",
                                  transport_->PeerName((transport_->rank() + 1) %
                                                       transport_->size()),
                                  " failed: ", st.message()));
    }
  }
}

absl::Status RingAllReduce::AllReduceSum(absl::Span<const absl::Span<float>> tensors) {
  const uint64_t step = next_step_++;
  if (options_.bucket_bytes < 4 || options_.chunk_bytes < 4) {
    return absl::InvalidArgumentError(absl::StrCat("all-reduce: bucket_bytes ",
                                                   options_.bucket_bytes, " and chunk_bytes ",
                                                   options_.chunk_bytes, " must be >= 4"));
  }
  if (transport_->size() == 1) return absl::OkStatus();
  absl::Status status = ReduceAll(step, tensors);
  if (!status.ok()) DropSends();
  return status;
}

absl::Status RingAllReduce::ReduceAll(uint64_t step, absl::Span<const absl::Span<float>> tensors) {
  PS_RETURN_IF_ERROR(SendError());
  int64_t total = 0;
  for (const absl::Span<float>& t : tensors) total += static_cast<int64_t>(t.size());
  const int64_t bucket_elems = options_.bucket_bytes / 4;
  int32_t bucket = 0;
  for (int64_t begin = 0; begin < total; begin += bucket_elems, ++bucket) {
    const int64_t count = std::min(bucket_elems, total - begin);
    // A bucket inside one tensor is reduced in place; others go through the fusion buffer.
    int64_t offset = 0;
    absl::Span<float> in_place;
    for (const absl::Span<float>& t : tensors) {
      if (begin >= offset && begin + count <= offset + static_cast<int64_t>(t.size())) {
        in_place = t.subspan(begin - offset, count);
        break;
      }
      offset += static_cast<int64_t>(t.size());
    }
    if (in_place.data() != nullptr) {
      PS_RETURN_IF_ERROR(ReduceBucket(step, bucket, in_place));
      continue;
    }
    // Sends of an earlier bucket may still read the fusion buffer.
    PS_RETURN_IF_ERROR(Flush());
    fusion_.resize(count);
    CopyRange(tensors, begin, absl::MakeSpan(fusion_), /*to_fusion=*/true);
    PS_RETURN_IF_ERROR(ReduceBucket(step, bucket, absl::MakeSpan(fusion_)));
    CopyRange(tensors, begin, absl::MakeSpan(fusion_), /*to_fusion=*/false);
  }
  // Our last chunks must have reached the next rank before we report success: a caller
  // may exit right after the last collective.
  return Flush();
}

absl::Status RingAllReduce::ReduceBucket(uint64_t step, int32_t bucket, absl::Span<float> data) {
  const int n = transport_->size();
  const int me = transport_->rank();
  const int64_t length = static_cast<int64_t>(data.size());
  const int64_t chunk_elems = std::max<int64_t>(1, options_.chunk_bytes / 4);
  auto seg_begin = [&](int s) { return length * s / n; };
  auto seg_chunks = [&](int s) {
    return (seg_begin(s + 1) - seg_begin(s) + chunk_elems - 1) / chunk_elems;
  };
  auto chunk_span = [&](int s, int64_t c) {
    const int64_t lo = seg_begin(s) + c * chunk_elems;
    const int64_t hi = std::min(seg_begin(s + 1), lo + chunk_elems);
    return data.subspan(lo, hi - lo);
  };
  const int last_round = 2 * (n - 1) - 1;
  // Round 0 of the reduce-scatter sends our own segment.
  for (int64_t c = 0; c < seg_chunks(me); ++c) {
    Send(ChunkKey{step, bucket, 0, static_cast<int32_t>(c)}, chunk_span(me, c));
  }
  const std::string prev = transport_->PeerName((me + n - 1) % n);
  for (int round = 0; round <= last_round; ++round) {
    // Rounds 0..n-2 receive partial sums to add (reduce-scatter); rounds n-1.. receive
    // finished sums to copy (all-gather). Either way the segment received in a round is
    // the one sent on in the next.
    const int seg = ((me - round - 1) % n + n) % n;
    for (int64_t c = 0; c < seg_chunks(seg); ++c) {
      const ChunkKey key{step, bucket, round, static_cast<int32_t>(c)};
      const absl::Time deadline = absl::Now() + options_.timeout;
      absl::StatusOr<ChunkData> got;
      while (true) {
        got = transport_->TryReceive(key, std::min(kPollSlice, deadline - absl::Now()));
        if (got.ok() || !absl::IsDeadlineExceeded(got.status())) break;
        PS_RETURN_IF_ERROR(SendError());
        if (absl::Now() >= deadline) {
          return absl::DeadlineExceededError(absl::StrCat(
              "all-reduce ", step, ": no data from ", prev, " within ",
              absl::FormatDuration(options_.timeout), " (bucket ", bucket, ", round ", round,
              ", chunk ", c, ")"));
        }
      }
      if (!got.ok()) return got.status();
      absl::Span<float> mine = chunk_span(seg, c);
      if (got->size() != mine.size()) {
        return absl::InternalError(absl::StrCat(
            "all-reduce ", step, ": ", prev, " sent ", got->size(), " values for bucket ",
            bucket, " round ", round, " chunk ", c, ", expected ", mine.size(),
            " (do all workers reduce the same shapes?)"));
      }
      // Straight from where the transport received the floats (one read of them).
      if (round < n - 1) {
        got->AddTo(mine);
      } else {
        got->CopyTo(mine);
      }
      if (round < last_round) {
        Send(ChunkKey{step, bucket, round + 1, static_cast<int32_t>(c)}, mine);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain
