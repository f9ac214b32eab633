#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_RING_TRANSPORT_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_RING_TRANSPORT_H_

// The transport-neutral seam under the ring all-reduce: a worker of a ring of size() ranks
// pushes chunks to its right neighbour (rank + 1) and takes the chunks its left neighbour
// (rank - 1) pushed, by key. Implementations: gRPC (grpc_ring_transport.h) and an
// in-process fake (in_process_ring.h) for tests.
//
// Thread-safety: SendToNext and TryReceive may be called from different threads at once
// (the all-reduce sends on a sender thread while it receives on the caller's).

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace pstrain {

// Names one chunk of one collective (see proto/collective.proto).
struct ChunkKey {
  uint64_t step = 0;  // the collective's sequence number
  int32_t bucket = 0;
  int32_t round = 0;
  int32_t chunk = 0;
};

inline bool operator<(const ChunkKey& a, const ChunkKey& b) {
  return std::tie(a.step, a.bucket, a.round, a.chunk) <
         std::tie(b.step, b.bucket, b.round, b.chunk);
}

// A received chunk's floats, left where the transport put them (gRPC's receive buffers,
// or a vector), so that the all-reduce reads them once, adding or copying them straight
// into its own buffer, instead of first copying them out into a vector.
// Thread-compatible; cheap to move.
class ChunkData {
 public:
  ChunkData() = default;
  // Implicit: a vector of floats is a chunk (the in-process transport, tests).
  ChunkData(std::vector<float> values);  // NOLINT(google-explicit-constructor)
  // The chunk is the concatenation of `pieces` (any alignment; a float may straddle two
  // pieces), valid while `owner` lives. Their total length must be whole floats.
  ChunkData(std::vector<absl::Span<const char>> pieces, std::shared_ptr<const void> owner);

  // Number of floats.
  size_t size() const { return bytes_ / sizeof(float); }

  // out[i] += chunk[i] (AddTo) or out[i] = chunk[i] (CopyTo); out.size() == size().
  void AddTo(absl::Span<float> out) const;
  void CopyTo(absl::Span<float> out) const;
  std::vector<float> ToVector() const;

 private:
  std::vector<float> values_;
  std::vector<absl::Span<const char>> pieces_;
  std::shared_ptr<const void> owner_;
  size_t bytes_ = 0;
};

class RingTransport {
 public:
  virtual ~RingTransport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "worker 1 (localhost:4001)": how errors name a rank.
  virtual std::string PeerName(int rank) const = 0;

  // Hands `data` to rank (rank()+1) % size() under `key`; returns once it accepted it.
  // The transport may send straight from `data` (no copy): the caller keeps it valid
  // and unchanged until this returns, and the transport never reads it afterwards, also
  // when it fails. A peer that is not up yet is waited for, up to `timeout`.
  // Errors: DEADLINE_EXCEEDED or UNAVAILABLE naming the next rank; CANCELLED after
  // shutdown.
  virtual absl::Status SendToNext(const ChunkKey& key, absl::Span<const float> data,
                                  absl::Duration timeout) = 0;

  // The chunk the previous rank sent under `key`, waiting up to `wait` for it (callers
  // poll in short waits so they can notice their own send failing meanwhile).
  // Errors: DEADLINE_EXCEEDED when it has not come within `wait` (retryable: the caller
  // decides when the peer is late); CANCELLED after shutdown.
  virtual absl::StatusOr<ChunkData> TryReceive(const ChunkKey& key, absl::Duration wait) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_RING_TRANSPORT_H_
