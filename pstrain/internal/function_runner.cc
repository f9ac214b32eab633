#include "pstrain/internal/function_runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "distribute/failure.h"

namespace pstrain::distribute::internal {

int FunctionRunner::RegisterFunction(std::string name, Function fn) {
  absl::MutexLock lock(&mu_);
  names_.push_back(std::move(name));
  functions_.push_back(std::move(fn));
  return static_cast<int>(functions_.size()) - 1;
}

int FunctionRunner::AddIterator(std::unique_ptr<DistributedIterator> iterator) {
  absl::MutexLock lock(&mu_);
  iterators_.push_back(std::move(iterator));
  return static_cast<int>(iterators_.size()) - 1;
}

void FunctionRunner::SetPlacementFingerprint(uint64_t fingerprint) {
  absl::MutexLock lock(&mu_);
  placement_fingerprint_ = fingerprint;
}

void FunctionRunner::SetReady(bool ready) {
  absl::MutexLock lock(&mu_);
  ready_ = ready;
}

absl::Status FunctionRunner::Resolve(const RunFunctionRequest& request, Function* fn,
                                     DistributedIterator** iterator) {
  absl::MutexLock lock(&mu_);
  if (!ready_) {
    return absl::UnavailableError("not serving functions (yet): ClusterCoordinator::Serve "
                                  "has not been called");
  }
  const int f = request.function_index();
  if (f < 0 || f >= static_cast<int>(functions_.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the chief scheduled function ", f, " (\"", request.function(), "\") but this worker ",
        "registered ", functions_.size(), ": every task registers the same functions in the "
        "same order"));
  }
  if (names_[f] != request.function()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "function ", f, " is \"", names_[f], "\" here but the chief scheduled \"",
        request.function(), "\": every task registers the same functions in the same order"));
  }
  const int i = request.iterator_index();
  if (i < 0 || i >= static_cast<int>(iterators_.size()) || iterators_[i] == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "function \"", names_[f], "\" was scheduled on per-worker iterator ", i,
        " but this worker made ", iterators_.size(), ": every task creates the same ones"));
  }
  if (request.placement_fingerprint() != placement_fingerprint_) {
    return absl::FailedPreconditionError(
        "the chief placed the variables on the ps tasks differently from this worker: do "
        "both create the same model with the same placement and number of ps tasks?");
  }
  *fn = functions_[f];
  *iterator = iterators_[i].get();
  return absl::OkStatus();
}

absl::StatusOr<RunFunctionResponse> FunctionRunner::Run(const RunFunctionRequest& request) {
  absl::MutexLock run_lock(&run_mu_);
  Function fn;
  DistributedIterator* iterator = nullptr;
  RunFunctionResponse response;
  absl::Status resolved = Resolve(request, &fn, &iterator);
  if (absl::IsUnavailable(resolved)) return resolved;
  absl::StatusOr<std::vector<double>> result =
      resolved.ok() ? fn(*iterator) : absl::StatusOr<std::vector<double>>(resolved);
  // A function fails on a ps when the ps is gone or came back empty: reported ABORTED,
  // as a training worker's RunSteps does, so the chief recovers the ps instead of taking
  // this worker for lost (the transport's UNAVAILABLE) or failing the job.
  if (resolved.ok() && !result.ok()) result = PsFailureOnWorker(result.status());
  {
    absl::MutexLock lock(&mu_);
    ++functions_run_;
  }
  if (!result.ok()) {
    response.set_code(static_cast<int>(result.status().code()));
    response.set_message(std::string(result.status().message()));
    return response;
  }
  for (double v : *result) response.add_values(v);
  return response;
}

FunctionWorkerStatusResponse FunctionRunner::Status() const {
  absl::MutexLock lock(&mu_);
  FunctionWorkerStatusResponse status;
  status.set_ready(ready_);
  status.set_functions_run(functions_run_);
  for (const std::string& name : names_) status.add_functions(name);
  return status;
}

}  // namespace pstrain::distribute::internal
