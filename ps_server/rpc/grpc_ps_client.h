#ifndef PSTRAIN_PS_SERVER_RPC_GRPC_PS_CLIENT_H_
#define PSTRAIN_PS_SERVER_RPC_GRPC_PS_CLIENT_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "ps_server/ps_client.h"

namespace pstrain {

// A PsClient over gRPC. Every call carries `timeout` as its deadline.
std::unique_ptr<PsClient> CreateGrpcPsClient(int ps_index, const std::string& address,
                                             absl::Duration timeout);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_GRPC_PS_CLIENT_H_
