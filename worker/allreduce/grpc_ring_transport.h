#ifndef PSTRAIN_WORKER_ALLREDUCE_GRPC_RING_TRANSPORT_H_
#define PSTRAIN_WORKER_ALLREDUCE_GRPC_RING_TRANSPORT_H_

// The all-reduce ring over gRPC (proto/collective.proto): every worker serves a
// CollectiveService that files incoming chunks in its mailbox, and pushes its own chunks
// to the next worker with PushChunk, one unary call per chunk, each with a deadline.
//
// Thread-safety: as RingTransport; the service's handlers run on gRPC's threads.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/collective.grpc.pb.h"
#include "worker/allreduce/chunk_mailbox.h"
#include "worker/allreduce/ring_transport.h"

namespace pstrain {

// The receiving side: register it on the worker's gRPC server (common/rpc/grpc_util.h).
class CollectiveService final : public Collective::Service {
 public:
  // `mailbox` is not owned and must outlive the server. Chunks from any rank other than
  // `expected_src` are refused with INVALID_ARGUMENT (a misconfigured ring).
  CollectiveService(ChunkMailbox* mailbox, int expected_src)
      : mailbox_(mailbox), expected_src_(expected_src) {}

  grpc::Status PushChunk(grpc::ServerContext* context, const CollectiveChunk* request,
                         CollectiveChunkAck* reply) override;

 private:
  ChunkMailbox* const mailbox_;  // Not owned.
  const int expected_src_;
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
  absl::Status SendToNext(const ChunkKey& key, absl::Span<const float> data,
                          absl::Duration timeout) override;
  absl::StatusOr<std::vector<float>> TryReceive(const ChunkKey& key,
                                                absl::Duration wait) override;

 private:
  GrpcRingTransport(GrpcRingOptions options, ChunkMailbox* mailbox);

  const GrpcRingOptions options_;
  ChunkMailbox* const mailbox_;  // Not owned.
  std::unique_ptr<Collective::Stub> next_;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_ALLREDUCE_GRPC_RING_TRANSPORT_H_
