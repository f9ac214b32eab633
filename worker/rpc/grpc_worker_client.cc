#include "worker/rpc/grpc_worker_client.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"
#include "proto/worker.grpc.pb.h"

namespace pstrain {
namespace {

class GrpcWorkerClient final : public WorkerClient {
 public:
  GrpcWorkerClient(int worker_index, const std::string& address, absl::Duration timeout,
                   absl::Duration run_steps_timeout)
      : name_(absl::StrCat("worker task ", worker_index, " (", address, ")")),
        stub_(Worker::NewStub(CreateChannel(address))),
        timeout_(timeout),
        run_steps_timeout_(run_steps_timeout) {}

  std::string name() const override { return name_; }

  absl::StatusOr<RunStepsResponse> RunSteps(const RunStepsRequest& request) override {
    return Call(&Worker::Stub::RunSteps, request, RunStepsResponse(), run_steps_timeout_);
  }
  absl::StatusOr<WorkerStatusResponse> GetStatus() override {
    return Call(&Worker::Stub::GetStatus, WorkerStatusRequest(), WorkerStatusResponse(),
                timeout_);
  }
  absl::Status Shutdown(const std::string& reason) override {
    ShutdownRequest request;
    request.set_reason(reason);
    return Call(&Worker::Stub::Shutdown, request, ShutdownResponse(), timeout_).status();
  }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (Worker::Stub::*method)(grpc::ClientContext*,
                                                                      const Request&, Response*),
                                const Request& request, Response response,
                                absl::Duration timeout) {
    grpc::ClientContext context;
    SetTimeout(&context, timeout);
    absl::Status status =
        FromGrpcStatus((stub_.get()->*method)(&context, request, &response), name_);
    if (!status.ok()) return status;
    return response;
  }

  const std::string name_;
  std::unique_ptr<Worker::Stub> stub_;
  const absl::Duration timeout_;
  const absl::Duration run_steps_timeout_;
};

}  // namespace

std::unique_ptr<WorkerClient> CreateGrpcWorkerClient(int worker_index, const std::string& address,
                                                     absl::Duration timeout,
                                                     absl::Duration run_steps_timeout) {
  return std::make_unique<GrpcWorkerClient>(worker_index, address, timeout, run_steps_timeout);
}

}  // namespace pstrain
