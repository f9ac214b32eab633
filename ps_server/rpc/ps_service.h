#ifndef PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_
#define PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_

#include <functional>
#include <string>

#include "proto/ps.grpc.pb.h"
#include "ps_server/variable_store.h"

namespace pstrain {

// gRPC adapter over a VariableStore: unpacks requests, calls the store, converts status.
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

 private:
  VariableStore* store_;  // Not owned.
  std::function<void(const std::string&)> on_shutdown_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_RPC_PS_SERVICE_H_
