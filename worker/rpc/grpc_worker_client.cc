#include "worker/rpc/grpc_worker_client.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"
#include "proto/function.grpc.pb.h"
#include "worker/worker_functions.h"

namespace pstrain {
namespace {

// Speaks the FunctionWorker service (proto/function.proto): the chunk of steps is the
// worker's built-in function kTrainChunkFunction, its request and response serialized.
class GrpcWorkerClient final : public WorkerClient {
 public:
  GrpcWorkerClient(int worker_index, const std::string& address, absl::Duration timeout,
                   absl::Duration run_steps_timeout)
      : name_(absl::StrCat("worker task ", worker_index, " (", address, ")")),
        stub_(FunctionWorker::NewStub(CreateChannel(address))),
        timeout_(timeout),
        run_steps_timeout_(run_steps_timeout) {}

  std::string name() const override { return name_; }

  absl::StatusOr<RunStepsResponse> RunSteps(const RunStepsRequest& request) override {
    RunFunctionRequest call;
    call.set_function(kTrainChunkFunction);
    call.set_function_index(-1);  // built-in functions are found by name
    call.set_arguments(request.SerializeAsString());
    absl::StatusOr<RunFunctionResponse> answer =
        Call(&FunctionWorker::Stub::RunFunction, call, RunFunctionResponse(), run_steps_timeout_);
    if (!answer.ok()) return answer.status();
    // The chunk's own error, as the coordinator reads it (distribute/failure.h): ABORTED a
    // failed ps, FAILED_PRECONDITION busy or no job, ...; the worker is named as for an
    // RPC error.
    if (answer->code() != 0) {
      return absl::Status(static_cast<absl::StatusCode>(answer->code()),
                          absl::StrCat(name_, ": ", answer->message()));
    }
    RunStepsResponse response;
    if (!response.ParseFromString(answer->result())) {
      return absl::InternalError(
          absl::StrCat(name_, ": the result of ", kTrainChunkFunction,
                       " is not a RunStepsResponse"));
    }
    return response;
  }
  absl::StatusOr<WorkerStatusResponse> GetStatus() override {
    absl::StatusOr<FunctionWorkerStatusResponse> answer =
        Call(&FunctionWorker::Stub::GetStatus, FunctionWorkerStatusRequest(),
             FunctionWorkerStatusResponse(), timeout_);
    if (!answer.ok()) return answer.status();
    WorkerStatusResponse status;
    status.set_steps_done(answer->steps_done());
    status.set_busy(answer->busy());
    status.set_backend(answer->backend());
    // Ready to train: it serves and has the chunk (a custom loop's worker at this
    // address would not).
    bool has_chunk = false;
    for (const std::string& f : answer->functions()) has_chunk |= f == kTrainChunkFunction;
    status.set_ready(answer->ready() && has_chunk);
    return status;
  }
  absl::Status Shutdown(const std::string& reason) override {
    ShutdownRequest request;
    request.set_reason(reason);
    return Call(&FunctionWorker::Stub::Shutdown, request, ShutdownResponse(), timeout_)
        .status();
  }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (FunctionWorker::Stub::*method)(
                                    grpc::ClientContext*, const Request&, Response*),
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
  std::unique_ptr<FunctionWorker::Stub> stub_;
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
