#include "pstrain/internal/function_worker_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"
#include "proto/function.grpc.pb.h"

namespace pstrain::distribute::internal {
namespace {

class GrpcFunctionWorkerClient : public FunctionWorkerClient {
 public:
  GrpcFunctionWorkerClient(std::string name, const std::string& address,
                           absl::Duration function_timeout, absl::Duration rpc_timeout)
      : name_(absl::StrCat(name, " (", address, ")")),
        stub_(FunctionWorker::NewStub(CreateChannel(address))),
        function_timeout_(function_timeout),
        rpc_timeout_(rpc_timeout) {}

  std::string name() const override { return name_; }

  absl::StatusOr<RunFunctionResponse> Run(const RunFunctionRequest& request) override {
    grpc::ClientContext context;
    SetTimeout(&context, function_timeout_);
    RunFunctionResponse response;
    grpc::Status status = stub_->RunFunction(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status, name_);
    return response;
  }

  absl::StatusOr<bool> Ready() override {
    grpc::ClientContext context;
    SetTimeout(&context, rpc_timeout_);
    FunctionWorkerStatusResponse response;
    grpc::Status status = stub_->GetStatus(&context, FunctionWorkerStatusRequest(), &response);
    if (!status.ok()) return FromGrpcStatus(status, name_);
    return response.ready();
  }

  absl::Status Shutdown(const std::string& reason) override {
    grpc::ClientContext context;
    SetTimeout(&context, rpc_timeout_);
    ShutdownRequest request;
    request.set_reason(reason);
    ShutdownResponse response;
    grpc::Status status = stub_->Shutdown(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status, name_);
    return absl::OkStatus();
  }

 private:
  const std::string name_;
  const std::unique_ptr<FunctionWorker::Stub> stub_;
  const absl::Duration function_timeout_;
  const absl::Duration rpc_timeout_;
};

}  // namespace

std::unique_ptr<FunctionWorkerClient> CreateGrpcFunctionWorkerClient(
    const std::string& name, const std::string& address, absl::Duration function_timeout,
    absl::Duration rpc_timeout) {
  return std::make_unique<GrpcFunctionWorkerClient>(name, address, function_timeout,
                                                    rpc_timeout);
}

absl::StatusOr<RunFunctionResponse> LocalFunctionWorkerClient::Run(
    const RunFunctionRequest& request) {
  if (!reachable_) return absl::UnavailableError(absl::StrCat(name_, ": unreachable"));
  absl::StatusOr<RunFunctionResponse> response = runner_->Run(request);
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat(name_, ": ", response.status().message()));
  }
  return response;
}

absl::StatusOr<bool> LocalFunctionWorkerClient::Ready() {
  if (!reachable_) return absl::UnavailableError(absl::StrCat(name_, ": unreachable"));
  return runner_->Status().ready();
}

absl::Status LocalFunctionWorkerClient::Shutdown(const std::string& reason) {
  (void)reason;
  if (!reachable_) return absl::UnavailableError(absl::StrCat(name_, ": unreachable"));
  runner_->SetReady(false);
  return absl::OkStatus();
}

}  // namespace pstrain::distribute::internal
