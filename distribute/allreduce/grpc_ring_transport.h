#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_GRPC_RING_TRANSPORT_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_GRPC_RING_TRANSPORT_H_

// The all-reduce ring over gRPC (proto/collective.proto): every worker serves a
// CollectiveService that files incoming chunks in its mailbox, and sends its own chunks
// to the next worker, each with a deadline, in one of two ways by size:
//  - a chunk of at most kMaxStreamedChunkBytes (the seed model's whole all-reduce is one
//    such chunk per segment) is copied into a message on one long-lived ChunkStream call
//    (a client stream) to the next worker: no call set-up, metadata, interceptors or
//    reply per chunk, and no round trip the sender waits for;
//  - a larger one goes out as a PushChunk call (unary) from the caller's memory: no copy,
//    and the call's per-chunk costs are small next to its bytes.
// bench/README.md ("Issue 29 item 3") has the measurements behind the split. Both methods
// are served with gRPC's callback API: filing a chunk never blocks, so the handler runs
// inline on gRPC's thread, without the synchronous server's hand-off to its pool.
//
// The receiver files the slices gRPC read into the mailbox as they are, so the
// all-reduce adds or copies straight from them; a PushChunk's floats are sent as a slice
// over the caller's memory (common/rpc/payload_message.h). The bytes on the wire are the
// CollectiveChunk message either way.
//
// Thread-safety: as RingTransport; the service's handlers run on gRPC's threads.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/payload_message.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/impl/service_type.h"
#include "proto/collective.grpc.pb.h"
#include "distribute/allreduce/chunk_mailbox.h"
#include "distribute/allreduce/ring_transport.h"

namespace pstrain {

// CollectiveChunk with `data` (field 6) in gRPC slices.
using CollectiveChunkSlices = PayloadMessage<CollectiveChunk, 6>;

inline constexpr char kPushChunkMethod[] = "/pstrain.Collective/PushChunk";
inline constexpr char kChunkStreamMethod[] = "/pstrain.Collective/ChunkStream";

// Chunks up to this size go on the stream, copied; larger ones by PushChunk, not copied.
// Not every chunk on the stream: a message written on a stream from the caller's memory
// was still held by gRPC (gRPC 1.51) a minute after its write completed, with nothing
// more written, and SendToNext may return only once gRPC let go of `data`; so streamed
// chunks are copies. Up to 1 MiB the copy costs less than a call per chunk: 1 MB at 2
// ranks (512 KiB chunks) moved 29% faster streamed than by PushChunk, 2 MB at 4 ranks 12%,
// in alternated rounds (allreduce_bandwidth, bench/README.md, "The ring's 1 MB loss");
// larger chunks (the ring's default is 2 MiB) keep the zero-copy call.
inline constexpr size_t kMaxStreamedChunkBytes = 1 << 20;

// The receiving side: register it on the worker's gRPC server (common/rpc/grpc_util.h).
// It serves service pstrain.Collective (PushChunk and ChunkStream) with its own handlers
// rather than the generated Collective::Service, whose messages hold the bytes in a
// std::string, and by callback: the server's interceptors (the authorizer's, the reply
// proof) run for them as for synchronous methods.
class CollectiveService final : public grpc::Service {
 public:
  // `mailbox` is not owned and must outlive the server. Chunks from any rank other than
  // `expected_src` are refused with INVALID_ARGUMENT (a misconfigured ring). When
  // `expected_sender_type` is set, a call whose authenticated caller
  // (common/rpc/call_authorizer.h) is not that task ("worker", 1) is refused with
  // PERMISSION_DENIED: only the left neighbour sends chunks, and only as its own rank.
  CollectiveService(ChunkMailbox* mailbox, int expected_src,
                    std::string expected_sender_type = "", int expected_sender_index = 0);

  // Checks the caller and the chunk and files it in the mailbox (PushChunk's body).
  grpc::Status PushChunk(const grpc::ServerContextBase* context,
                         const CollectiveChunkSlices* request, CollectiveChunkAck* reply);

 private:
  // ChunkStream's reactor: checks the caller once, then each chunk as PushChunk does.
  class ChunkReader;

  grpc::Status CheckCaller(const grpc::ServerContextBase& context) const;
  // Checks `chunk` (sender rank, whole floats) and files its slices in the mailbox.
  grpc::Status File(const CollectiveChunkSlices& chunk);

  ChunkMailbox* const mailbox_;  // Not owned.
  const int expected_src_;
  const std::string expected_sender_type_;
  const int expected_sender_index_;
};

struct GrpcRingOptions {
  int rank = 0;
  // Every rank's "host:port", in ring order.
  std::vector<std::string> addresses;
  // Every rank's name for errors ("worker 1"); empty: "rank N".
  std::vector<std::string> names;
};

class GrpcRingTransport : public RingTransport {
 public:
  // Errors: INVALID_ARGUMENT when rank is out of range or names and addresses differ in
  // length. Connects lazily. `mailbox` is not owned: the one the local CollectiveService
  // fills.
  static absl::StatusOr<std::unique_ptr<GrpcRingTransport>> Create(GrpcRingOptions options,
                                                                   ChunkMailbox* mailbox);
  // Close()s with a short wait.
  ~GrpcRingTransport() override;

  int rank() const override { return options_.rank; }
  int size() const override { return static_cast<int>(options_.addresses.size()); }
  // "worker 1 (localhost:4001)".
  std::string PeerName(int rank) const override;

  // Hands `data` to the next rank (see the file comment for how). The first send of each
  // kind waits for the next rank to come up (wait_for_ready) within `timeout`, so workers
  // that start at different moments meet; a dead one is named at the deadline.
  // Streamed chunks: returns once gRPC took the copy on the stream (the chunk is on its
  // way, not yet in the peer's mailbox: a lost one is the peer's "no data from" error;
  // Close() confirms the peer filed them all). A write not done within `timeout` (a dead
  // peer, or an alive one that stopped reading) cancels the stream and fails with
  // DEADLINE_EXCEEDED naming the peer, as does a stream the peer ended (with its error);
  // the next send opens a new stream. A stream older than ten minutes is closed and a
  // new one opened, so the receiving server never retires its connection under it.
  // PushChunk: sends `data` in place and returns once gRPC released it: at once after a
  // successful call; after a failed one when its queued frames are written or dropped,
  // which a stalled (alive, not reading) peer can hold up. Past a further `timeout` it
  // gives up with INTERNAL, and gRPC may then still read `data` until that connection
  // drains or drops: the one case where RingTransport's contract is not kept (the ring is
  // broken by then and its worker exits).
  absl::Status SendToNext(const ChunkKey& key, absl::Span<const float> data,
                          absl::Duration timeout) override;
  absl::StatusOr<ChunkData> TryReceive(const ChunkKey& key, absl::Duration wait) override;

  // Half-closes the stream to the next rank and waits up to `timeout` for its reply,
  // which comes once it filed every chunk written before (cancels it past that): call it
  // before the process exits after its last collective. Later streamed sends fail with
  // CANCELLED.
  // Errors: the stream's, naming the peer (e.g. one that exited first). Idempotent.
  absl::Status Close(absl::Duration timeout);

 private:
  class ChunkWriter;

  GrpcRingTransport(GrpcRingOptions options, ChunkMailbox* mailbox);
  std::string NextName() const { return PeerName((options_.rank + 1) % size()); }
  // A chunk of at most kMaxStreamedChunkBytes: written on the stream, opened if need be.
  absl::Status WriteOnStream(CollectiveChunkSlices chunk, absl::Duration timeout);
  // Ends writer_ (half-closes, or cancels it when `cancel`), waits for its end, and
  // clears it. Returns its final status.
  absl::Status EndStream(bool cancel, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const GrpcRingOptions options_;
  ChunkMailbox* const mailbox_;  // Not owned.
  std::shared_ptr<grpc::Channel> next_;
  const grpc::internal::RpcMethod push_chunk_;
  const grpc::internal::RpcMethod chunk_stream_;

  // Held for the whole of a send: one write on the stream at a time.
  absl::Mutex mu_;
  std::unique_ptr<ChunkWriter> writer_ ABSL_GUARDED_BY(mu_);  // null: no stream open
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_GRPC_RING_TRANSPORT_H_
