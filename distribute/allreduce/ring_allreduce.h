#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_RING_ALLREDUCE_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_RING_ALLREDUCE_H_

// Bandwidth-optimal ring all-reduce (sum) over a RingTransport: reduce-scatter then
// all-gather, each rank sending and receiving 2(n-1)/n of the data once.
//
// The tensors of one call are fused, in order, into buckets of at most bucket_bytes; each
// bucket is cut into n segments (sizes differ by at most one element; empty segments are
// fine, so buckets smaller than n work) and each segment into chunks of at most
// chunk_bytes. Chunks are pipelined: a chunk received and added in round k is queued to
// the next rank for round k+1 at once, on a sender thread, while the next chunk is being
// received, so the link stays busy and no rank waits for a whole segment.
//
// Every rank must call AllReduceSum with the same element counts in the same order (the
// call's sequence number names its chunks). All ranks end with bit-identical results:
// each element's sum is formed once, on one rank, and then copied around.
//
// Thread-safety: one thread calls AllReduceSum at a time.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "distribute/allreduce/ring_transport.h"

namespace pstrain {

struct RingAllReduceOptions {
  int64_t bucket_bytes = 25 << 20;  // fusion bucket (PyTorch DDP's default)
  // One message; gRPC is fastest at 256 KiB - 4 MiB, and allreduce_bandwidth measured
  // 2 MiB 10-20% above 1 MiB and 4 MiB at 4-64 MB (bench/README.md).
  int64_t chunk_bytes = 2 << 20;
  // A peer that has not delivered an expected chunk (or accepted ours) within this is
  // declared dead and named in the error.
  absl::Duration timeout = absl::Seconds(30);
};

class RingAllReduce {
 public:
  // `transport` is not owned and must outlive this object.
  RingAllReduce(RingTransport* transport, RingAllReduceOptions options);
  ~RingAllReduce();
  RingAllReduce(const RingAllReduce&) = delete;
  RingAllReduce& operator=(const RingAllReduce&) = delete;

  // Replaces every element of every tensor by its sum over all ranks.
  // Errors: INVALID_ARGUMENT for options with bucket or chunk below 4 bytes;
  // DEADLINE_EXCEEDED "all-reduce 12: no data from worker 1 (host:port) within 5s" when
  // the previous rank is late; UNAVAILABLE / DEADLINE_EXCEEDED naming the next rank when
  // it does not accept a chunk; INTERNAL when a rank sent a chunk of the wrong size (the
  // ranks disagree about the shapes). After an error the ring is unusable (the ranks are
  // out of step): the caller stops.
  // Chunks are sent straight from `tensors` (no copy), so a call returns, with or
  // without an error, only once no send reads them any more: when the next rank is
  // stalled (alive, not reading) rather than dead, that can take up to twice the timeout.
  absl::Status AllReduceSum(absl::Span<const absl::Span<float>> tensors);

  // Changes the timeout for later calls (e.g. long while the workers start, short after).
  void set_timeout(absl::Duration timeout) { options_.timeout = timeout; }
  absl::Duration timeout() const { return options_.timeout; }

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }

 private:
  struct PendingSend {
    ChunkKey key;
    // The chunk in the bucket being reduced, sent without a copy. Nothing writes it while
    // the send is queued or in flight: a region sent in one round is written again only
    // in a later round of the same collective whose data causally follows the next rank
    // having received this send (the ring's data dependency), and the buffer is handed
    // back to the caller, or the fusion buffer reused, only after Flush or DropSends.
    absl::Span<const float> data;
    absl::Duration timeout;  // read by the sender thread: a copy, not options_
  };

  absl::Status ReduceBucket(uint64_t step, int32_t bucket, absl::Span<float> data);
  void Send(const ChunkKey& key, absl::Span<const float> data);
  absl::Status SendError();
  // Waits until every queued send is done; returns the first send error.
  absl::Status Flush();
  // Drops the queued sends and waits for the one in flight: after it, no send reads the
  // caller's buffers (an all-reduce that fails returns only after this).
  void DropSends();
  absl::Status ReduceAll(uint64_t step, absl::Span<const absl::Span<float>> tensors);
  void SenderLoop();

  RingTransport* const transport_;  // Not owned.
  RingAllReduceOptions options_;
  uint64_t next_step_ = 0;
  std::vector<float> fusion_;

  // State below is protected by mu_; the sender thread drains queue_.
  absl::Mutex mu_;
  std::deque<PendingSend> queue_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status send_error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_RING_ALLREDUCE_H_
