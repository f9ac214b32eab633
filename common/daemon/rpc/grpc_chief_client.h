#ifndef PSTRAIN_COMMON_DAEMON_RPC_GRPC_CHIEF_CLIENT_H_
#define PSTRAIN_COMMON_DAEMON_RPC_GRPC_CHIEF_CLIENT_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/daemon/chief_client.h"

namespace pstrain {

// A ChiefClient over gRPC; every call carries `timeout` as its deadline.
std::unique_ptr<ChiefClient> CreateGrpcChiefClient(const std::string& address,
                                                   absl::Duration timeout);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_RPC_GRPC_CHIEF_CLIENT_H_
