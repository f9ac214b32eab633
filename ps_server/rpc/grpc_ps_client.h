#ifndef PSTRAIN_PS_SERVER_RPC_GRPC_PS_CLIENT_H_
#define PSTRAIN_PS_SERVER_RPC_GRPC_PS_CLIENT_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "ps_server/ps_client.h"
#include "ps_server/rpc/push_pull_stream.h"

namespace pstrain {

struct GrpcPsClientOptions {
  // A PushPull whose gradients hold at least this many bytes together goes over the
  // PushPullStream RPC, in chunks of `chunk_bytes` with the bytes in gRPC slices; smaller
  // ones stay on the unary PushPull (one message each way: fastest for small tensors).
  int64_t stream_threshold_bytes = 256 << 10;
  int64_t chunk_bytes = kDefaultPushPullChunkBytes;
};

// A PsClient over gRPC. Every call carries `timeout` as its deadline. Every push carries
// a fresh request id, and a push-and-pull that found the ps unreachable (UNAVAILABLE) is
// tried once more with the same id, so the ps applies it at most once.
std::unique_ptr<PsClient> CreateGrpcPsClient(int ps_index, const std::string& address,
                                             absl::Duration timeout,
                                             const GrpcPsClientOptions& options);
inline std::unique_ptr<PsClient> CreateGrpcPsClient(int ps_index, const std::string& address,
                                                    absl::Duration timeout) {
  return CreateGrpcPsClient(ps_index, address, timeout, GrpcPsClientOptions());
}

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_GRPC_PS_CLIENT_H_
