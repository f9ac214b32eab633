#ifndef PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_
#define PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/memory_budget.h"
#include "common/rpc/grpc_util.h"
#include "proto/ps.grpc.pb.h"
#include "ps_server/checkpoint_shards.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/handoff_threads.h"
#include "ps_server/rpc/push_pull_stream.h"
#include "ps_server/rpc/server_stream.h"
#include "ps_server/rpc/stream_limiter.h"
#include "ps_server/variable_store.h"

namespace pstrain {

// The longest name a request may carry (a variable's, a worker's, a slot's; a shutdown
// reason): a longer one is refused (INVALID_ARGUMENT) before anything is kept.
inline constexpr size_t kMaxWireNameBytes = 1024;

// Per-call and per-peer limits of the ps service.
struct PsServiceOptions {
  // Largest answer a Pull or PushPull builds (the values' bytes), below gRPC's message
  // limit so that a refused pull is refused before anything is copied.
  int64_t max_pull_bytes = kMaxMessageBytes - (1 << 20);
  StreamLimits stream_limits;
  // Bytes the service may hold at once for requests in flight (a push-pull stream's
  // gradients and the values it answers with, PullRows' answers), charged before they
  // are allocated: a request that does not fit what is free is refused at once
  // (RESOURCE_EXHAUSTED). 0: a quarter of the process's memory budget (--max_memory).
  int64_t request_memory_bytes = 0;
  // The job's number of workers (its cluster spec); 0: not known, not checked. A push
  // whose caller's identity is worker-i with i >= num_workers is refused.
  int num_workers = 0;
};

using PushPullServerStream = ServerStream<PushPullChunkOut, PushPullChunkIn>;


// ParameterServer's methods by position in proto/ps.proto, for the handlers registered by
// index (the callback methods below; kPushPullStreamMethodIndex in push_pull_stream.h).
// ps_service_test checks each against the service's descriptor.
inline constexpr int kPullMethodIndex = 1;
inline constexpr int kPushMethodIndex = 2;
inline constexpr int kPushPullMethodIndex = 3;
inline constexpr int kPullRowsMethodIndex = 9;
inline constexpr int kPushRowsMethodIndex = 10;

// gRPC adapter over a VariableStore: unpacks requests, calls the store, converts status.
// PushPullStream is served by PushPullChunks, with the tensor bytes as gRPC slices
// (ps_server/rpc/push_pull_stream.h) instead of the generated protobuf handler.
// The calls of every training step (Pull, Push, PushPull, PullRows, PushRows) are served
// with gRPC's callback API: the handler runs on gRPC's callback threads, without the
// synchronous server's thread pool (7% less CPU for a seed-model cluster,
// bench/README.md). A push that may wait for other workers' pushes
// (sync and bounded staleness, or before the mode is set) runs on a thread of its own
// (HandoffThreads) instead, so that gRPC's threads never block. The synchronous overrides
// of those five stay for in-process callers (the fuzzer); gRPC does not call them.
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
  // Sharded checkpoints (CheckpointShards): FAILED_PRECONDITION without one
  // (set_checkpoint_shards).
  grpc::Status WriteCheckpointShard(grpc::ServerContext* context,
                                    const WriteCheckpointShardRequest* request,
                                    WriteCheckpointShardResponse* response) override;
  grpc::Status RestoreCheckpointShard(grpc::ServerContext* context,
                                      const RestoreCheckpointShardRequest* request,
                                      RestoreCheckpointShardResponse* response) override;

  // PushPullStream: reads the push header and checks it against the store (every
  // gradient a variable held here, of its shape, each once) and charges its bytes to the
  // request memory before it accepts a byte of data; reads every gradient's chunks up to
  // the message marked commit and the client's clean half-close; sends the response's
  // initial metadata, which fails on a stream the client reset; only then pushes them
  // all at once, and streams the pulled values back in chunks of `chunk_bytes` (the
  // request's chunks may be of any size). A stream that ends any other way (cancelled or
  // reset at any point, even right after its commit; past its deadline; idle or open too
  // long; a message that does not parse) applies nothing. A client that cancels after
  // the ps applied its push may still be told CANCELLED: its retry (the same request id)
  // is not applied again.
  grpc::Status PushPullChunks(grpc::ServerContext* context, PushPullServerStream* stream);

  // What requests in flight hold now, at most, and were refused (request_memory_bytes).
  const MemoryLedger& request_memory() const { return request_memory_; }
  // PushPullStream calls whose handler is running (it has not returned).
  int open_streams() const { return streams_.open(); }
  // For tests: runs on the handler's thread after each message a PushPullStream handler
  // reads, with the number it has read. Call before the server starts.
  void set_stream_read_hook_for_testing(std::function<void(int)> hook) {
    stream_read_hook_ = std::move(hook);
  }
  // For tests: runs on the handler's thread once a PushPullStream has ended cleanly after
  // its commit, just before the ps checks the reply can still be sent and applies.
  void set_before_apply_hook_for_testing(std::function<void(grpc::ServerContext*)> hook) {
    before_apply_hook_ = std::move(hook);
  }

  // Size of the value chunks PushPullChunks sends (tests use tiny ones). Call before the
  // server starts.
  void set_chunk_bytes(int64_t chunk_bytes) { chunk_bytes_ = chunk_bytes; }

  // The ps's part of sharded checkpoints (not owned; null, the default: the ps has no
  // --checkpoint_dir, and says so in GetStatus). Call before the server starts.
  void set_checkpoint_shards(const CheckpointShards* shards) { checkpoint_shards_ = shards; }

  // Where pushes, bytes and refused calls are counted (not owned; null: nowhere). Call
  // before the server starts.
  void set_metrics(PsMetrics* metrics) { metrics_ = metrics; }

 private:
  // The bodies of the five methods served by callback (their overrides call them too).
  grpc::Status ServePull(const grpc::ServerContextBase* context, const PullRequest* request,
                         PullResponse* response);
  grpc::Status ServePush(const grpc::ServerContextBase* context, const PushRequest* request,
                         PushResponse* response);
  grpc::Status ServePushPull(const grpc::ServerContextBase* context,
                             const PushPullRequest* request, PushPullResponse* response);
  grpc::Status ServePullRows(const grpc::ServerContextBase* context,
                             const PullRowsRequest* request, PullRowsResponse* response);
  grpc::Status ServePushRows(const grpc::ServerContextBase* context,
                             const PushRowsRequest* request, PushRowsResponse* response);
  // Has gRPC serve method `method_index` of ParameterServer by callback with `serve`:
  // inline, or on handoff_ when the method `pushes` and a push may wait
  // (VariableStore::pushes_never_wait).
  template <class Request, class Response>
  void ServeByCallback(int method_index,
                       grpc::Status (PsServiceImpl::*serve)(const grpc::ServerContextBase*,
                                                            const Request*, Response*),
                       bool pushes);

  // PushPullChunks' steps: reads the whole push into `assembler`, or says why not.
  // `push_context` gets whom the push counts under (ContextOf, checked at its header),
  // `charge` the push's bytes charged to request_memory_.
  absl::Status ReadPush(grpc::ServerContext* context, PushPullServerStream* stream,
                        StreamLimiter::Lease* lease, PushRequest* push,
                        PushContext* push_context, TensorAssembler* assembler,
                        MemoryLedger::Charge* charge);
  // Checks a stream's push header against the store before any of its data is accepted.
  // Returns the bytes its gradients take.
  absl::StatusOr<int64_t> CheckStreamHeader(const PushRequest& push) const;
  // The push context of `request` from `caller` (null: an in-process call): its worker is
  // the caller's identity when it has one (PusherName in ps_service.cc).
  absl::StatusOr<PushContext> ContextOf(const grpc::ServerContextBase* caller,
                                        const PushRequest& request) const;
  // Streams `values` back: a header with versions, then the bytes in chunks.
  struct PulledValues;
  absl::Status WriteValues(PushPullServerStream* stream,
                           std::shared_ptr<const PulledValues> values);

  VariableStore* store_;  // Not owned.
  std::function<void(const std::string&)> on_shutdown_;
  const PsServiceOptions options_;
  int64_t chunk_bytes_ = kDefaultPushPullChunkBytes;
  PsMetrics* metrics_ = nullptr;  // Not owned; may be null.
  const CheckpointShards* checkpoint_shards_ = nullptr;  // Not owned; may be null.
  std::function<void(int)> stream_read_hook_;
  std::function<void(grpc::ServerContext*)> before_apply_hook_;

  // store_->Push, timed and counted.
  // `wire_bytes`: the gradients' size as they came (the received-bytes metric).
  absl::Status Push(absl::Span<const NamedTensor> gradients, const PushContext& context,
                    int64_t wire_bytes);
  // Counts the bytes of pulled values and the call's result.
  grpc::Status Answer(const char* method, const absl::Status& status);

  StreamLimiter streams_;
  MemoryLedger request_memory_;
  // Pulls refused for their size or the request memory, and streams refused for the
  // request memory (RESOURCE_EXHAUSTED), for GetStatus.
  std::atomic<int64_t> pulls_refused_{0};
  std::atomic<int64_t> streams_over_memory_{0};
  // Last: destroyed first, it finishes the pushes handed to it while the rest is alive.
  HandoffThreads handoff_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_
