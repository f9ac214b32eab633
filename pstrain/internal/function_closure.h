#ifndef PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_CLOSURE_H_
#define PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_CLOSURE_H_

// The custom loop's closure on the chief (distribute/closure_scheduler.h): one registered
// function, run on whichever worker the scheduler picks over RunFunction
// (function_worker_client.h), and, once it is done, its result (a RemoteValue's state).
// How its outcome is read is distribute/failure.h's rule: the transport's error (the
// worker unreachable, past the deadline, not ready) loses the worker; a function that
// failed because of a ps comes back ABORTED in the response (FunctionRunner reports it so)
// and is a failed ps; any other code in the response is the function's own error.
//
// Thread-safety: Run is called by one scheduler thread at a time; the rest from any.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "distribute/closure_scheduler.h"
#include "proto/function.pb.h"
#include "pstrain/internal/function_worker_client.h"

namespace pstrain::distribute::internal {

class FunctionClosure : public Closure {
 public:
  // `workers` are not owned and outlive the closure; indexed as the scheduler's.
  FunctionClosure(RunFunctionRequest request, std::vector<FunctionWorkerClient*> workers)
      : request_(std::move(request)), workers_(std::move(workers)) {}
  // The request it sends (closure_id aside: that is id(), set when it is scheduled).
  const RunFunctionRequest& request() const { return request_; }

  // Blocks until the function is done; its value as numbers, or its error (CANCELLED
  // when an earlier function failed first, UNAVAILABLE when no worker was left).
  absl::StatusOr<std::vector<double>> Wait() const ABSL_LOCKS_EXCLUDED(mu_);
  bool done() const ABSL_LOCKS_EXCLUDED(mu_);

  // `function "train" (closure 3)`.
  std::string Describe() const override;
  // Errors: the transport's, as the client returns it (naming the worker); the
  // function's own, "function "train" (closure 3) on worker 1 (...): <its message>" with
  // its code (ABORTED: a ps failed).
  absl::Status Run(int worker) override ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(absl::Status status) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const RunFunctionRequest request_;
  const std::vector<FunctionWorkerClient*> workers_;  // Not owned.

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::vector<double> values_ ABSL_GUARDED_BY(mu_);  // of the run that succeeded
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<std::vector<double>> result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_CLOSURE_H_
