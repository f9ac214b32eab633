#include "distribute/allreduce/grpc_ring_transport.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/grpc_util.h"
#include "common/status_macros.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "grpcpp/support/server_callback.h"

namespace pstrain {
namespace {

// A stream to the next rank is replaced by a new one after this long (half-closed, its
// reply awaited, at a send): well within the receiving server's max_connection_age
// grace (common/rpc/grpc_util.h), so the server never cuts a stream with chunks in flight
// when it retires the connection.
constexpr absl::Duration kStreamLifetime = absl::Minutes(10);

}  // namespace

// ChunkStream's receiving reactor. Every reaction runs on gRPC's threads and never blocks:
// it files the chunk and asks for the next.
class CollectiveService::ChunkReader final
    : public grpc::ServerReadReactor<CollectiveChunkSlices> {
 public:
  ChunkReader(CollectiveService* service, grpc::CallbackServerContext* context)
      : service_(service) {
    // The caller is the stream's (its connection's certificate, or the token's identity):
    // checked once, before any chunk is read.
    if (grpc::Status caller = service_->CheckCaller(*context); !caller.ok()) {
      Finish(caller);
      return;
    }
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The sender half-closed (every chunk before it is filed: its reply says so) or the
      // stream broke; a chunk that did not parse also ends the read, with an error.
      Finish(chunk_.malformed()
                 ? grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "a chunk that does not parse as a CollectiveChunk")
                 : grpc::Status::OK);
      return;
    }
    // Checked per message as PushChunk checks its one: a refused chunk ends the stream.
    if (grpc::Status filed = service_->File(chunk_); !filed.ok()) {
      Finish(filed);
      return;
    }
    chunk_ = CollectiveChunkSlices();
    StartRead(&chunk_);
  }

  void OnDone() override { delete this; }

 private:
  CollectiveService* const service_;
  CollectiveChunkSlices chunk_;
};

CollectiveService::CollectiveService(ChunkMailbox* mailbox, int expected_src,
                                     std::string expected_sender_type, int expected_sender_index)
    : mailbox_(mailbox),
      expected_src_(expected_src),
      expected_sender_type_(std::move(expected_sender_type)),
      expected_sender_index_(expected_sender_index) {
  // Served by callback (as the ps's methods are, ps_server/rpc/ps_service.cc): filing a
  // chunk never waits, so the handlers finish inline on the thread gRPC read the chunk
  // on, with no hand-off to a synchronous server's thread.
  auto* push = new grpc::internal::RpcServiceMethod(
      kPushChunkMethod, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::CallbackUnaryHandler<CollectiveChunkSlices, CollectiveChunkAck>(
          [this](grpc::CallbackServerContext* context, const CollectiveChunkSlices* request,
                 CollectiveChunkAck* reply) {
            grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
            reactor->Finish(PushChunk(context, request, reply));
            return reactor;
          }));
  push->SetServerApiType(grpc::internal::RpcServiceMethod::ApiType::CALL_BACK);
  AddMethod(push);
  auto* stream = new grpc::internal::RpcServiceMethod(
      kChunkStreamMethod, grpc::internal::RpcMethod::CLIENT_STREAMING,
      new grpc::internal::CallbackClientStreamingHandler<CollectiveChunkSlices,
                                                         CollectiveChunkAck>(
          [this](grpc::CallbackServerContext* context, CollectiveChunkAck*) {
            return new ChunkReader(this, context);
          }));
  stream->SetServerApiType(grpc::internal::RpcServiceMethod::ApiType::CALL_BACK);
  AddMethod(stream);
}

grpc::Status CollectiveService::CheckCaller(const grpc::ServerContextBase& context) const {
  if (expected_sender_type_.empty()) return grpc::Status::OK;
  return CheckCallerIsTask(context, expected_sender_type_, expected_sender_index_);
}

grpc::Status CollectiveService::PushChunk(const grpc::ServerContextBase* context,
                                          const CollectiveChunkSlices* request,
                                          CollectiveChunkAck* reply) {
  (void)reply;
  if (grpc::Status caller = CheckCaller(*context); !caller.ok()) return caller;
  return File(*request);
}

grpc::Status CollectiveService::File(const CollectiveChunkSlices& chunk) {
  const CollectiveChunk& header = chunk.fields();
  if (header.src_rank() != expected_src_) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("chunk from rank ", header.src_rank(),
                                     ", but this rank's left neighbour is ", expected_src_));
  }
  const size_t bytes = chunk.payload_size();
  if (bytes % sizeof(float) != 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("chunk of ", bytes, " bytes is not whole floats"));
  }
  // Little-endian on the wire, as every host pstrain runs on: the received bytes are the
  // floats. The slices (references to gRPC's receive buffers) outlive this call in the
  // mailbox.
  auto slices = std::make_shared<const std::vector<grpc::Slice>>(chunk.payload_slices());
  std::vector<absl::Span<const char>> pieces;
  pieces.reserve(slices->size());
  for (const grpc::Slice& s : *slices) {
    pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  mailbox_->Deliver(ChunkKey{header.step(), header.bucket(), header.round(), header.chunk()},
                    ChunkData(std::move(pieces), std::move(slices)));
  return grpc::Status::OK;
}

// One ChunkStream call to the next rank. The transport calls its methods one at a time
// (under its mu_); gRPC's reactions run on gRPC's threads and only record what happened.
// A hold keeps the call open (no OnDone) until End(), so Write never meets a finished call
// even when the peer ended it between writes: that write then fails.
class GrpcRingTransport::ChunkWriter final
    : public grpc::ClientWriteReactor<CollectiveChunkSlices> {
 public:
  enum class Outcome { kWritten, kFailed, kTimedOut };

  ChunkWriter(grpc::ChannelInterface* channel, const grpc::internal::RpcMethod& method)
      : opened_(absl::Now()) {
    // The first write waits for the next rank to come up; each write's timeout bounds it.
    context_.set_wait_for_ready(true);
    grpc::internal::ClientCallbackWriterFactory<CollectiveChunkSlices>::Create(
        channel, method, &context_, &ack_, this);
    AddHold();
    StartCall();
  }

  absl::Duration age() const { return absl::Now() - opened_; }

  // Writes `chunk` (kept until gRPC is done with it) and waits up to `timeout` for it.
  Outcome Write(CollectiveChunkSlices chunk, absl::Duration timeout) {
    chunk_ = std::move(chunk);
    {
      absl::MutexLock lock(&state_->mu);
      state_->write_done = false;
    }
    StartWrite(&chunk_);
    absl::MutexLock lock(&state_->mu);
    if (!state_->mu.AwaitWithTimeout(absl::Condition(&state_->write_done), timeout)) {
      return Outcome::kTimedOut;  // chunk_ stays, in use, until the call is done
    }
    chunk_.ClearPayload();
    return state_->write_ok ? Outcome::kWritten : Outcome::kFailed;
  }

  // Half-closes the call (or cancels it) and waits up to `timeout` for its end, cancelling
  // it past that and waiting as long again. False: it has not ended, and gRPC still uses
  // this object. `status`: the call's final status.
  bool End(bool cancel, absl::Duration timeout, grpc::Status* status) {
    if (cancel) {
      context_.TryCancel();
    } else {
      StartWritesDone();
    }
    RemoveHold();
    absl::MutexLock lock(&state_->mu);
    if (!state_->mu.AwaitWithTimeout(absl::Condition(&state_->done), timeout)) {
      context_.TryCancel();
      if (!state_->mu.AwaitWithTimeout(absl::Condition(&state_->done), timeout)) return false;
    }
    *status = state_->status;
    return true;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&state_->mu);
    state_->write_done = true;
    state_->write_ok = ok;
  }

  void OnDone(const grpc::Status& status) override {
    // The waiter may destroy this object as soon as `done` is set: the state outlives it.
    std::shared_ptr<State> state = state_;
    absl::MutexLock lock(&state->mu);
    state->done = true;
    state->status = status;
  }

 private:
  struct State {
    absl::Mutex mu;
    bool write_done ABSL_GUARDED_BY(mu) = false;
    bool write_ok ABSL_GUARDED_BY(mu) = false;
    bool done ABSL_GUARDED_BY(mu) = false;
    grpc::Status status ABSL_GUARDED_BY(mu);
  };

  const absl::Time opened_;
  grpc::ClientContext context_;
  CollectiveChunkAck ack_;
  CollectiveChunkSlices chunk_;
  const std::shared_ptr<State> state_ = std::make_shared<State>();
};

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
      push_chunk_(kPushChunkMethod, grpc::internal::RpcMethod::NORMAL_RPC, next_),
      chunk_stream_(kChunkStreamMethod, grpc::internal::RpcMethod::CLIENT_STREAMING, next_) {}

GrpcRingTransport::~GrpcRingTransport() {
  // After a clean end the stream is closed already; after a broken ring there is nothing
  // left to report to.
  Close(absl::Seconds(1)).IgnoreError();
}

std::string GrpcRingTransport::PeerName(int rank) const {
  const std::string name =
      options_.names.empty() ? absl::StrCat("rank ", rank) : options_.names[rank];
  return absl::StrCat(name, " (", options_.addresses[rank], ")");
}

absl::Status GrpcRingTransport::EndStream(bool cancel, absl::Duration timeout) {
  grpc::Status final_status;
  if (!writer_->End(cancel, timeout, &final_status)) {
    // gRPC still holds the call, so the writer must outlive it: it is left behind (one
    // per broken ring, whose worker exits).
    (void)writer_.release();
    return absl::InternalError(absl::StrCat(NextName(), ": the chunk stream did not end within ",
                                            absl::FormatDuration(2 * timeout),
                                            " of being cancelled"));
  }
  writer_.reset();
  if (final_status.ok()) return absl::OkStatus();
  return FromGrpcStatus(final_status, NextName());
}

absl::Status GrpcRingTransport::SendToNext(const ChunkKey& key, absl::Span<const float> data,
                                           absl::Duration timeout) {
  CollectiveChunkSlices chunk;
  CollectiveChunk& header = chunk.fields();
  header.set_src_rank(options_.rank);
  header.set_step(key.step);
  header.set_bucket(key.bucket);
  header.set_round(key.round);
  header.set_chunk(key.chunk);
  const size_t bytes = data.size() * sizeof(float);
  if (bytes <= kMaxStreamedChunkBytes) {
    chunk.SetPayloadCopy(data.data(), bytes);
    return WriteOnStream(std::move(chunk), timeout);
  }
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
    chunk.SetPayload(SliceWithOwner(data.data(), bytes, std::move(pin)));
  }
  grpc::ClientContext context;
  SetTimeout(&context, timeout);
  context.set_wait_for_ready(true);
  CollectiveChunkAck reply;
  const grpc::Status status =
      grpc::internal::BlockingUnaryCall<CollectiveChunkSlices, CollectiveChunkAck>(
          next_.get(), push_chunk_, &context, chunk, &reply);
  chunk.ClearPayload();
  {
    absl::MutexLock lock(&released->mu);
    // Done at once when the call succeeded (the peer read every byte); after a failure
    // gRPC may still be writing frames it had queued, which takes until the socket
    // drains or the connection drops.
    if (!released->mu.AwaitWithTimeout(absl::Condition(&released->done), timeout)) {
      return absl::InternalError(absl::StrCat(NextName(), ": gRPC still holds a chunk ",
                                              absl::FormatDuration(timeout),
                                              " after its call ended (", status.error_message(),
                                              ")"));
    }
  }
  if (status.ok()) return absl::OkStatus();
  return FromGrpcStatus(status, NextName());
}

absl::Status GrpcRingTransport::WriteOnStream(CollectiveChunkSlices chunk,
                                              absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (closed_) {
    return absl::CancelledError(absl::StrCat("the all-reduce's stream to ", NextName(),
                                             " is closed"));
  }
  if (writer_ != nullptr && writer_->age() > kStreamLifetime) {
    // Every chunk written on the old stream is filed once its reply comes.
    PS_RETURN_IF_ERROR(EndStream(/*cancel=*/false, timeout));
  }
  if (writer_ == nullptr) writer_ = std::make_unique<ChunkWriter>(next_.get(), chunk_stream_);
  const ChunkWriter::Outcome outcome = writer_->Write(std::move(chunk), timeout);
  if (outcome == ChunkWriter::Outcome::kWritten) return absl::OkStatus();
  // The stream is broken, and the next send opens a new one. A failed write: the peer
  // ended it (the half-close fetches its reason); a late one: it stopped reading or never
  // came up, and the stream is cancelled.
  absl::Status ended =
      EndStream(/*cancel=*/outcome == ChunkWriter::Outcome::kTimedOut, timeout);
  if (outcome == ChunkWriter::Outcome::kTimedOut) {
    return absl::DeadlineExceededError(
        absl::StrCat(NextName(), ": a chunk was not taken within ",
                     absl::FormatDuration(timeout),
                     ended.ok() ? "" : absl::StrCat(" (", ended.message(), ")")));
  }
  if (!ended.ok()) return ended;
  return absl::UnavailableError(
      absl::StrCat(NextName(), ": the chunk stream ended before a chunk was written"));
}

absl::Status GrpcRingTransport::Close(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::OkStatus();
  closed_ = true;
  if (writer_ == nullptr) return absl::OkStatus();
  return EndStream(/*cancel=*/false, timeout);
}

absl::StatusOr<ChunkData> GrpcRingTransport::TryReceive(const ChunkKey& key,
                                                        absl::Duration wait) {
  return mailbox_->Take(key, wait);
}

}  // namespace pstrain
