#include "distribute/allreduce/grpc_ring_transport.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/grpc_util.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/method_handler.h"

namespace pstrain {

CollectiveService::CollectiveService(ChunkMailbox* mailbox, int expected_src,
                                     std::string expected_sender_type, int expected_sender_index)
    : mailbox_(mailbox),
      expected_src_(expected_src),
      expected_sender_type_(std::move(expected_sender_type)),
      expected_sender_index_(expected_sender_index) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      kPushChunkMethod, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<CollectiveService, CollectiveChunkSlices,
                                           CollectiveChunkAck>(
          [](CollectiveService* self, grpc::ServerContext* context,
             const CollectiveChunkSlices* request, CollectiveChunkAck* reply) {
            return self->PushChunk(context, request, reply);
          },
          this)));
}

grpc::Status CollectiveService::PushChunk(grpc::ServerContext* context,
                                          const CollectiveChunkSlices* request,
                                          CollectiveChunkAck* reply) {
  (void)reply;
  if (!expected_sender_type_.empty()) {
    if (grpc::Status caller =
            CheckCallerIsTask(*context, expected_sender_type_, expected_sender_index_);
        !caller.ok()) {
      return caller;
    }
  }
  const CollectiveChunk& header = request->fields();
  if (header.src_rank() != expected_src_) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("chunk from rank ", header.src_rank(),
                                     ", but this rank's left neighbour is ", expected_src_));
  }
  const size_t bytes = request->payload_size();
  if (bytes % sizeof(float) != 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("chunk of ", bytes, " bytes is not whole floats"));
  }
  // Little-endian on the wire, as every host pstrain runs on: the received bytes are the
  // floats. The slices (references to gRPC's receive buffers) outlive this call in the
  // mailbox.
  auto slices = std::make_shared<const std::vector<grpc::Slice>>(request->payload_slices());
  std::vector<absl::Span<const char>> pieces;
  pieces.reserve(slices->size());
  for (const grpc::Slice& s : *slices) {
    pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  mailbox_->Deliver(ChunkKey{header.step(), header.bucket(), header.round(), header.chunk()},
                    ChunkData(std::move(pieces), std::move(slices)));
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<GrpcRingTransport>> GrpcRingTransport::Create(
    GrpcRingOptions options, ChunkMailbox* mailbox) {
  const int n = static_cast<int>(options.addresses.size());
  if (options.rank < 0 || options.rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring rank ", options.rank, " out of range for ", n, " addresses"));
  }
  if (!options.names.empty() && static_cast<int>(options.names.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("ring has ", n, " addresses but ",
                                                   options.names.size(), " names"));
  }
  return std::unique_ptr<GrpcRingTransport>(new GrpcRingTransport(std::move(options), mailbox));
}

GrpcRingTransport::GrpcRingTransport(GrpcRingOptions options, ChunkMailbox* mailbox)
    : options_(std::move(options)),
      mailbox_(mailbox),
      next_(CreateChannel(options_.addresses[(options_.rank + 1) % size()])),
      push_chunk_(kPushChunkMethod, grpc::internal::RpcMethod::NORMAL_RPC, next_) {}

std::string GrpcRingTransport::PeerName(int rank) const {
  const std::string name =
      options_.names.empty() ? absl::StrCat("rank ", rank) : options_.names[rank];
  return absl::StrCat(name, " (", options_.addresses[rank], ")");
}

absl::Status GrpcRingTransport::SendToNext(const ChunkKey& key, absl::Span<const float> data,
                                           absl::Duration timeout) {
  CollectiveChunkSlices request;
  CollectiveChunk& header = request.fields();
  header.set_src_rank(options_.rank);
  header.set_step(key.step);
  header.set_bucket(key.bucket);
  header.set_round(key.round);
  header.set_chunk(key.chunk);
  // The floats go out from the caller's memory. gRPC may let go of the slice a little
  // after the call returned, from one of its own threads, so `released` records when it
  // did; this returns only after that (the caller may then change `data`).
  struct Released {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
  };
  auto released = std::make_shared<Released>();
  {
    std::shared_ptr<const void> pin(data.data(), [released](const void*) {
      absl::MutexLock lock(&released->mu);
      released->done = true;
    });
    request.SetPayload(SliceWithOwner(data.data(), data.size() * sizeof(float), std::move(pin)));
  }
  grpc::ClientContext context;
  SetTimeout(&context, timeout);
  context.set_wait_for_ready(true);
  CollectiveChunkAck reply;
  const grpc::Status status =
      grpc::internal::BlockingUnaryCall<CollectiveChunkSlices, CollectiveChunkAck>(
          next_.get(), push_chunk_, &context, request, &reply);
  request.ClearPayload();
  {
    absl::MutexLock lock(&released->mu);
    // Done at once when the call succeeded (the peer read every byte); after a failure
    // gRPC may still be writing frames it had queued, which takes until the socket
    // drains or the connection drops.
    if (!released->mu.AwaitWithTimeout(absl::Condition(&released->done), timeout)) {
      return absl::InternalError(absl::StrCat(
          PeerName((options_.rank + 1) % size()), ": gRPC still holds a chunk ",
          absl::FormatDuration(timeout), " after its call ended (", status.error_message(),
          ")"));
    }
  }
  if (status.ok()) return absl::OkStatus();
  return FromGrpcStatus(status, PeerName((options_.rank + 1) % size()));
}

absl::StatusOr<ChunkData> GrpcRingTransport::TryReceive(const ChunkKey& key,
                                                        absl::Duration wait) {
  return mailbox_->Take(key, wait);
}

}  // namespace pstrain
