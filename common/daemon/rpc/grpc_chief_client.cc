#include "common/daemon/rpc/grpc_chief_client.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"
#include "proto/chief.grpc.pb.h"

namespace pstrain {
namespace {

class GrpcChiefClient final : public ChiefClient {
 public:
  GrpcChiefClient(const std::string& address, absl::Duration timeout)
      : name_(absl::StrCat("chief (", address, ")")),
        stub_(Chief::NewStub(CreateChannel(address))),
        timeout_(timeout) {}

  std::string name() const override { return name_; }

  absl::StatusOr<RegisterTaskResponse> RegisterTask(const RegisterTaskRequest& request) override {
    return Call(&Chief::Stub::RegisterTask, request, RegisterTaskResponse());
  }
  absl::StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& request) override {
    return Call(&Chief::Stub::Heartbeat, request, HeartbeatResponse());
  }
  absl::Status Report(const ReportRequest& request) override {
    return Call(&Chief::Stub::Report, request, ReportResponse()).status();
  }
  absl::StatusOr<ChiefStatusResponse> GetStatus() override {
    return Call(&Chief::Stub::GetStatus, ChiefStatusRequest(), ChiefStatusResponse());
  }
  absl::StatusOr<SaveCheckpointResponse> SaveCheckpoint() override {
    return Call(&Chief::Stub::SaveCheckpoint, SaveCheckpointRequest(), SaveCheckpointResponse());
  }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (Chief::Stub::*method)(grpc::ClientContext*,
                                                                     const Request&, Response*),
                                const Request& request, Response response) {
    grpc::ClientContext context;
    SetTimeout(&context, timeout_);
    absl::Status status = FromGrpcStatus((stub_.get()->*method)(&context, request, &response),
                                         name_);
    if (!status.ok()) return status;
    return response;
  }

  const std::string name_;
  std::unique_ptr<Chief::Stub> stub_;
  const absl::Duration timeout_;
};

}  // namespace

std::unique_ptr<ChiefClient> CreateGrpcChiefClient(const std::string& address,
                                                   absl::Duration timeout) {
  return std::make_unique<GrpcChiefClient>(address, timeout);
}

}  // namespace pstrain
