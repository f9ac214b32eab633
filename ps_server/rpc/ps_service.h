#ifndef PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_
#define PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/support/sync_stream.h"
#include "common/rpc/grpc_util.h"
#include "proto/ps.grpc.pb.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/push_pull_stream.h"
#include "ps_server/rpc/stream_limiter.h"
#include "ps_server/variable_store.h"

namespace pstrain {

// Per-call and per-peer limits of the ps service.
struct PsServiceOptions {
  // Largest answer a Pull or PushPull builds (the values' bytes), below gRPC's message
  // limit so that a refused pull is refused before anything is copied.
  int64_t max_pull_bytes = kMaxMessageBytes - (1 << 20);
  StreamLimits stream_limits;
};

// gRPC adapter over a VariableStore: unpacks requests, calls the store, converts status.
// PushPullStream is served by PushPullChunks, with the tensor bytes as gRPC slices
// (ps_server/rpc/push_pull_stream.h) instead of the generated protobuf handler.
class PsServiceImpl final : public ParameterServer::Service {
 public:
  // `store` is not owned. `on_shutdown` runs when a Shutdown RPC arrives, with its reason.
  PsServiceImpl(VariableStore* store, std::function<void(const std::string&)> on_shutdown,
                PsServiceOptions options = PsServiceOptions());

  grpc::Status CreateVariables(grpc::ServerContext* context, const CreateVariablesRequest* request,
                               CreateVariablesResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* context, const PullRequest* request,
                    PullResponse* response) override;
  grpc::Status Push(grpc::ServerContext* context, const PushRequest* request,
                    PushResponse* response) override;
  grpc::Status PushPull(grpc::ServerContext* context, const PushPullRequest* request,
                        PushPullResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const PsStatusRequest* request,
                         PsStatusResponse* response) override;
  grpc::Status ReadState(grpc::ServerContext* context, const ReadStateRequest* request,
                         ReadStateResponse* response) override;
  grpc::Status RestoreState(grpc::ServerContext* context, const RestoreStateRequest* request,
                            RestoreStateResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const ShutdownRequest* request,
                        ShutdownResponse* response) override;
  // Row-sparse pull and push (VariableStore::PullRows / PushRows). Their payload bytes
  // (the values and 8 bytes per row index) count in the metrics' sent and received bytes.
  grpc::Status PullRows(grpc::ServerContext* context, const PullRowsRequest* request,
                        PullRowsResponse* response) override;
  grpc::Status PushRows(grpc::ServerContext* context, const PushRowsRequest* request,
                        PushRowsResponse* response) override;

  // PushPullStream: reads the push header and every gradient's chunks up to the message
  // marked commit and the client's half-close, pushes them all at once, and streams the
  // pulled values back in chunks of `chunk_bytes` (the request's chunks may be of any
  // size). A stream that ends any other way (cancelled, past its deadline, idle or open
  // too long, a message that does not parse) applies nothing.
  grpc::Status PushPullChunks(grpc::ServerContext* context,
                              grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>* stream);

  // Size of the value chunks PushPullChunks sends (tests use tiny ones). Call before the
  // server starts.
  void set_chunk_bytes(int64_t chunk_bytes) { chunk_bytes_ = chunk_bytes; }

  // Where pushes, bytes and refused calls are counted (not owned; null: nowhere). Call
  // before the server starts.
  void set_metrics(PsMetrics* metrics) { metrics_ = metrics; }

 private:
  // PushPullChunks' steps: reads the whole push into `assembler`, or says why not.
  absl::Status ReadPush(grpc::ServerContext* context,
                        grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>* stream,
                        StreamLimiter::Lease* lease, PushRequest* push,
                        TensorAssembler* assembler);
  // Streams `values` back: a header with versions, then the bytes in chunks.
  absl::Status WriteValues(grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>* stream,
                           std::shared_ptr<const std::vector<Tensor>> values,
                           const std::vector<int64_t>& versions);

  VariableStore* store_;  // Not owned.
  std::function<void(const std::string&)> on_shutdown_;
  const PsServiceOptions options_;
  int64_t chunk_bytes_ = kDefaultPushPullChunkBytes;
  PsMetrics* metrics_ = nullptr;  // Not owned; may be null.

  // store_->Push, timed and counted.
  absl::Status Push(absl::Span<const NamedTensor> gradients, const PushContext& context);
  // Counts the bytes of pulled values and the call's result.
  grpc::Status Answer(const char* method, const absl::Status& status);

  StreamLimiter streams_;
  // Pulls refused for their size (RESOURCE_EXHAUSTED), for GetStatus.
  std::atomic<int64_t> pulls_refused_{0};
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_
