#ifndef PSTRAIN_PS_SERVER_RPC_SERVER_STREAM_H_
#define PSTRAIN_PS_SERVER_RPC_SERVER_STREAM_H_

// The server's end of a bidirectional stream for a handler that acts on what the client
// sent only once the client has finished: gRPC's synchronous ServerReaderWriter::Read
// returns false both when the client half-closed and when it cancelled (RST_STREAM), so a
// handler cannot tell "done, apply it" from "gave up, told it failed". This stream's reads
// tell them apart, and it sends its initial metadata on request and says whether that
// went out: a stream reset by the client is closed for writing too, so metadata that went
// out after the client's half-close proves the stream was not reset before it.
//
// ServerStreamHandler<W, R> serves a method with it (Service::MarkMethodStreamed). One
// handler thread uses a stream; it is not thread-safe. Initial metadata added to the
// ServerContext is not sent (nothing in pstrain adds any to these streams).

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "grpc/grpc.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/impl/call.h"
#include "grpcpp/impl/call_op_set.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace pstrain {

// How a read ended.
enum class StreamRead {
  kMessage,   // a message arrived (it may still not parse: see the message type)
  kEnded,     // the client half-closed: it sent everything it meant to
  kBroken,    // cancelled, reset, past its deadline or cut off: the client gave up
};

namespace internal {

// CompletionQueue::Pluck, which gRPC keeps to its own stream classes.
inline bool PluckOps(grpc::internal::Call* call, grpc::internal::CompletionQueueTag* ops) {
  while (true) {
    const grpc_event event = grpc_completion_queue_pluck(
        call->cq()->cq(), ops, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr);
    bool ok = event.success != 0;
    void* tag = ops;
    if (ops->FinalizeResult(&tag, &ok)) return ok;
  }
}

}  // namespace internal

template <class W, class R>
class ServerStream {
 public:
  ServerStream(grpc::internal::Call* call, grpc::ServerContext* context)
      : call_(call), context_(context) {}
  ServerStream(const ServerStream&) = delete;
  ServerStream& operator=(const ServerStream&) = delete;

  grpc::ServerContext* context() const { return context_; }

  // Waits for the next message. kEnded only for a clean half-close: a batch that failed,
  // or a stream the transport closed with an error before the message (the core's
  // "failed before recv message": RST_STREAM, a deadline), is kBroken.
  StreamRead Read(R* message) {
    if (broken_) return StreamRead::kBroken;
    grpc::internal::CallOpSet<grpc::internal::CallOpRecvMessage<R>> ops;
    ops.RecvMessage(message);
    ops.AllowNoMessage();
    call_->PerformOps(&ops);
    const bool ok = internal::PluckOps(call_, &ops);
    if (ops.got_message) return StreamRead::kMessage;
    if (!ok || grpc_call_failed_before_recv_message(call_->call()) != 0) {
      broken_ = true;
      return StreamRead::kBroken;
    }
    return StreamRead::kEnded;
  }

  // Sends the response's initial metadata now (once; later calls answer as the first).
  // False: the stream is closed for writing (the client reset it, or it was cancelled).
  bool SendInitialMetadata() {
    if (!sent_initial_metadata_) {
      grpc::internal::CallOpSet<grpc::internal::CallOpSendInitialMetadata> ops;
      ops.SendInitialMetadata(&initial_metadata_, 0);
      sent_initial_metadata_ = true;
      call_->PerformOps(&ops);
      initial_metadata_sent_ok_ = internal::PluckOps(call_, &ops);
    }
    return initial_metadata_sent_ok_;
  }

  // Sends one message (the initial metadata first, if not yet sent). False: the stream
  // is closed for writing.
  bool Write(const W& message) {
    if (!sent_initial_metadata_ && !SendInitialMetadata()) return false;
    if (!initial_metadata_sent_ok_) return false;
    grpc::internal::CallOpSet<grpc::internal::CallOpSendMessage> ops;
    if (!ops.SendMessagePtr(&message, grpc::WriteOptions()).ok()) return false;
    call_->PerformOps(&ops);
    return internal::PluckOps(call_, &ops);
  }

  bool sent_initial_metadata() const { return sent_initial_metadata_; }

 private:
  grpc::internal::Call* const call_;     // Not owned.
  grpc::ServerContext* const context_;   // Not owned.
  std::multimap<std::string, std::string> initial_metadata_;
  bool sent_initial_metadata_ = false;
  bool initial_metadata_sent_ok_ = false;
  bool broken_ = false;
};

// Runs `function` for each call of a bidirectional method with a ServerStream, then ends
// the call with the status it returned (and the initial metadata, if it sent none).
template <class W, class R>
class ServerStreamHandler : public grpc::internal::MethodHandler {
 public:
  using Function = std::function<grpc::Status(grpc::ServerContext*, ServerStream<W, R>*)>;
  explicit ServerStreamHandler(Function function) : function_(std::move(function)) {}

  void RunHandler(const HandlerParameter& param) final {
    auto* context = static_cast<grpc::ServerContext*>(param.server_context);
    ServerStream<W, R> stream(param.call, context);
    const grpc::Status status = function_(context, &stream);
    std::multimap<std::string, std::string> initial_metadata;
    std::multimap<std::string, std::string> trailing_metadata;
    grpc::internal::CallOpSet<grpc::internal::CallOpSendInitialMetadata,
                              grpc::internal::CallOpServerSendStatus>
        ops;
    if (!stream.sent_initial_metadata()) ops.SendInitialMetadata(&initial_metadata, 0);
    ops.ServerSendStatus(&trailing_metadata, status);
    param.call->PerformOps(&ops);
    internal::PluckOps(param.call, &ops);
  }

 private:
  const Function function_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_SERVER_STREAM_H_
