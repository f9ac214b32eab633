#ifndef PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_
#define PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_

#include <functional>
#include <string>

#include "grpcpp/support/sync_stream.h"
#include "proto/ps.grpc.pb.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/push_pull_stream.h"
#include "ps_server/variable_store.h"

namespace pstrain {

// gRPC adapter over a VariableStore: unpacks requests, calls the store, converts status.
// PushPullStream is served by PushPullChunks, with the tensor bytes as gRPC slices
// (ps_server/rpc/push_pull_stream.h) instead of the generated protobuf handler.
class PsServiceImpl final : public ParameterServer::Service {
 public:
  // `store` is not owned. `on_shutdown` runs when a Shutdown RPC arrives, with its reason.
  PsServiceImpl(VariableStore* store, std::function<void(const std::string&)> on_shutdown);

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

  // PushPullStream: reads the push header and every gradient's chunks until the client
  // half-closes, pushes them all at once, and streams the pulled values back in chunks
  // of `chunk_bytes` (the request's chunks may be of any size).
  grpc::Status PushPullChunks(grpc::ServerContext* context,
                              grpc::ServerReaderWriter<PushPullChunkOut, PushPullChunkIn>* stream);

  // Size of the value chunks PushPullChunks sends (tests use tiny ones). Call before the
  // server starts.
  void set_chunk_bytes(int64_t chunk_bytes) { chunk_bytes_ = chunk_bytes; }

  // Where pushes, bytes and refused calls are counted (not owned; null: nowhere). Call
  // before the server starts.
  void set_metrics(PsMetrics* metrics) { metrics_ = metrics; }

 private:
  VariableStore* store_;  // Not owned.
  std::function<void(const std::string&)> on_shutdown_;
  int64_t chunk_bytes_ = kDefaultPushPullChunkBytes;
  PsMetrics* metrics_ = nullptr;  // Not owned; may be null.

  // store_->Push, timed and counted.
  absl::Status Push(absl::Span<const NamedTensor> gradients, const PushContext& context);
  // Counts the bytes of pulled values and the call's result.
  grpc::Status Answer(const char* method, const absl::Status& status);
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_
