#ifndef PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_RUNNER_H_
#define PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_RUNNER_H_

// The worker side of ClusterCoordinator (pstrain/cluster_coordinator.h): the functions
// and per-worker iterators this process registered, run one at a time when the chief
// asks. A C++ function cannot travel, so every task of the job runs the same program
// and registers the same functions, in the same order: the chief names a function by its
// index and name and the worker checks both. Knows nothing of gRPC
// (function_worker_service.h adapts it).
//
// Thread-safety: every method may be called from any thread; Run calls are serialised
// (a worker runs one function at a time, as TensorFlow's workers do).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/function.pb.h"
#include "distribute/distributed_dataset.h"

namespace pstrain::distribute::internal {

class FunctionRunner {
 public:
  // A registered function: reads the iterator it is given and returns its value as
  // numbers (ValueCodec), or its error.
  using Function =
      std::function<absl::StatusOr<std::vector<double>>(DistributedIterator& iterator)>;

  // Returns the function's index (registration order).
  int RegisterFunction(std::string name, Function fn) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the iterator's index (creation order). `iterator` may be null on tasks that
  // never run functions (the chief).
  int AddIterator(std::unique_ptr<DistributedIterator> iterator) ABSL_LOCKS_EXCLUDED(mu_);
  // The placement of the variables this worker pushes to; a request made for another
  // one is refused (0: no variables).
  void SetPlacementFingerprint(uint64_t fingerprint) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether Run takes requests (the worker serves: ClusterCoordinator::Serve).
  void SetReady(bool ready) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs the request's function on its iterator. The function's result, or why the
  // request does not fit what this worker registered (a function or iterator it does not
  // have, another name, another placement: FAILED_PRECONDITION / INVALID_ARGUMENT), is in
  // the response. A function error that a failed ps explains (UNAVAILABLE,
  // DEADLINE_EXCEEDED, CANCELLED, ABORTED, NOT_FOUND, FAILED_PRECONDITION: see
  // distribute/failure.h PsFailureOnWorker) is reported ABORTED "a ps failed: ...". Errors (this worker cannot take functions): UNAVAILABLE not ready.
  absl::StatusOr<RunFunctionResponse> Run(const RunFunctionRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_, run_mu_);

  FunctionWorkerStatusResponse Status() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What request asks for, checked against what is registered.
  absl::Status Resolve(const RunFunctionRequest& request, Function* fn,
                       DistributedIterator** iterator) ABSL_LOCKS_EXCLUDED(mu_);

  // Held for a whole Run: one function at a time.
  absl::Mutex run_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<Function> functions_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<DistributedIterator>> iterators_ ABSL_GUARDED_BY(mu_);
  uint64_t placement_fingerprint_ ABSL_GUARDED_BY(mu_) = 0;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  int64_t functions_run_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_PSTRAIN_INTERNAL_FUNCTION_RUNNER_H_
