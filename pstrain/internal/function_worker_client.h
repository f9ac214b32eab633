#ifndef PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_WORKER_CLIENT_H_
#define PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_WORKER_CLIENT_H_

// A connection to one parameter_server worker task, as the chief's ClosureScheduler
// (distribute/closure_scheduler.h) and FunctionClosure see it. Implementations: gRPC
// (CreateGrpcFunctionWorkerClient) and an in-process one over a FunctionRunner
// (LocalFunctionWorkerClient) for tests. Every call has a deadline; errors
// start with name(). Thread-safe.

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "distribute/closure_scheduler.h"
#include "proto/function.pb.h"
#include "pstrain/internal/function_runner.h"

namespace pstrain::distribute::internal {

class FunctionWorkerClient : public ScheduledWorker {
 public:
  // "worker 1 (host:port)".
  std::string name() const override = 0;
  // Runs a function there. A non-OK status is the transport's (not reachable, not ready,
  // past the deadline: the function may run elsewhere; distribute/failure.h reads it). The
  // function's own failure, or a failed ps (ABORTED), is in the response.
  virtual absl::StatusOr<RunFunctionResponse> Run(const RunFunctionRequest& request) = 0;
  // Whether it serves functions. Errors: the transport's.
  absl::StatusOr<bool> Ready() override = 0;
  // Asks the task to exit. Errors: the transport's.
  virtual absl::Status Shutdown(const std::string& reason) = 0;
};

// `function_timeout` bounds Run, `rpc_timeout` the other calls.
std::unique_ptr<FunctionWorkerClient> CreateGrpcFunctionWorkerClient(
    const std::string& name, const std::string& address, absl::Duration function_timeout,
    absl::Duration rpc_timeout);

// The in-process fake: calls `runner` (not owned) directly; set_reachable(false) makes
// every call fail UNAVAILABLE, as a killed worker would.
class LocalFunctionWorkerClient : public FunctionWorkerClient {
 public:
  LocalFunctionWorkerClient(std::string name, FunctionRunner* runner)
      : name_(std::move(name)), runner_(runner) {}
  std::string name() const override { return name_; }
  absl::StatusOr<RunFunctionResponse> Run(const RunFunctionRequest& request) override;
  absl::StatusOr<bool> Ready() override;
  absl::Status Shutdown(const std::string& reason) override;
  void set_reachable(bool reachable) { reachable_ = reachable; }

 private:
  const std::string name_;
  FunctionRunner* const runner_;  // Not owned.
  std::atomic<bool> reachable_{true};
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_WORKER_CLIENT_H_
