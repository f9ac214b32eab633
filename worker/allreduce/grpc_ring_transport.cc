#include "worker/allreduce/grpc_ring_transport.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"

namespace pstrain {

grpc::Status CollectiveService::PushChunk(grpc::ServerContext* context,
                                          const CollectiveChunk* request,
                                          CollectiveChunkAck* reply) {
  (void)context;
  (void)reply;
  if (request->src_rank() != expected_src_) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("chunk from rank ", request->src_rank(),
                                     ", but this rank's left neighbour is ", expected_src_));
  }
  const std::string& bytes = request->data();
  if (bytes.size() % sizeof(float) != 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("chunk of ", bytes.size(), " bytes is not whole floats"));
  }
  // Little-endian on the wire, as every host pstrain runs on: a plain copy.
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  mailbox_->Deliver(ChunkKey{request->step(), request->bucket(), request->round(),
                             request->chunk()},
                    std::move(values));
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
    : options_(std::move(options)), mailbox_(mailbox) {
  next_ = Collective::NewStub(CreateChannel(options_.addresses[(options_.rank + 1) % size()]));
}

std::string GrpcRingTransport::PeerName(int rank) const {
  const std::string name =
      options_.names.empty() ? absl::StrCat("rank ", rank) : options_.names[rank];
  return absl::StrCat(name, " (", options_.addresses[rank], ")");
}

absl::Status GrpcRingTransport::SendToNext(const ChunkKey& key, absl::Span<const float> data,
                                           absl::Duration timeout) {
  CollectiveChunk request;
  request.set_src_rank(options_.rank);
  request.set_step(key.step);
  request.set_bucket(key.bucket);
  request.set_round(key.round);
  request.set_chunk(key.chunk);
  request.set_data(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  grpc::ClientContext context;
  SetTimeout(&context, timeout);
  context.set_wait_for_ready(true);
  CollectiveChunkAck reply;
  const grpc::Status status = next_->PushChunk(&context, request, &reply);
  if (status.ok()) return absl::OkStatus();
  return FromGrpcStatus(status, PeerName((options_.rank + 1) % size()));
}

absl::StatusOr<std::vector<float>> GrpcRingTransport::TryReceive(const ChunkKey& key,
                                                                 absl::Duration wait) {
  return mailbox_->Take(key, wait);
}

}  // namespace pstrain
