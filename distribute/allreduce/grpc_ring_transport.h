#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_GRPC_RING_TRANSPORT_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_GRPC_RING_TRANSPORT_H_

// The all-reduce ring over gRPC (proto/collective.proto): every worker serves a
// CollectiveService that files incoming chunks in its mailbox, and pushes its own chunks
// to the next worker with PushChunk, one unary call per chunk, each with a deadline.
//
// Both ends move a chunk's floats as gRPC slices (common/rpc/payload_message.h), not
// through the generated protobuf code: the sender's floats go out as a slice over the
// caller's memory, and the receiver files the slices gRPC read into the mailbox as they
// are, so the all-reduce adds or copies straight from them. No copy of the floats on
// either side; the bytes on the wire are still the CollectiveChunk message.
//
// Thread-safety: as RingTransport; the service's handlers run on gRPC's threads.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

// The receiving side: register it on the worker's gRPC server (common/rpc/grpc_util.h).
// It serves service pstrain.Collective (its one method, PushChunk) with its own
// handler rather than the generated Collective::Service, whose messages hold the bytes
// in a std::string.
class CollectiveService final : public grpc::Service {
 public:
  // `mailbox` is not owned and must outlive the server. Chunks from any rank other than
  // `expected_src` are refused with INVALID_ARGUMENT (a misconfigured ring). When
  // `expected_sender_type` is set, a call whose authenticated caller
  // (common/rpc/call_authorizer.h) is not that task ("worker", 1) is refused with
  // PERMISSION_DENIED: only the left neighbour sends chunks, and only as its own rank.
  CollectiveService(ChunkMailbox* mailbox, int expected_src,
                    std::string expected_sender_type = "", int expected_sender_index = 0);

  grpc::Status PushChunk(grpc::ServerContext* context, const CollectiveChunkSlices* request,
                         CollectiveChunkAck* reply);

 private:
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

  int rank() const override { return options_.rank; }
  int size() const override { return static_cast<int>(options_.addresses.size()); }
  // "worker 1 (localhost:4001)".
  std::string PeerName(int rank) const override;

  // Waits for the next rank to come up (wait_for_ready) within `timeout`, so workers
  // that start at different moments meet; a dead one is reported at the deadline.
  // Sends `data` in place and returns once gRPC released it: at once after a successful
  // call; after a failed one when its queued frames are written or dropped, which a
  // stalled (alive, not reading) peer can hold up. Past a further `timeout` it gives
  // up with INTERNAL, and gRPC may then still read `data` until that connection drains
  // or drops: the one case where RingTransport's contract is not kept (the ring is
  // broken by then and its worker exits).
  absl::Status SendToNext(const ChunkKey& key, absl::Span<const float> data,
                          absl::Duration timeout) override;
  absl::StatusOr<ChunkData> TryReceive(const ChunkKey& key, absl::Duration wait) override;

 private:
  GrpcRingTransport(GrpcRingOptions options, ChunkMailbox* mailbox);

  const GrpcRingOptions options_;
  ChunkMailbox* const mailbox_;  // Not owned.
  std::shared_ptr<grpc::Channel> next_;
  const grpc::internal::RpcMethod push_chunk_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_GRPC_RING_TRANSPORT_H_
