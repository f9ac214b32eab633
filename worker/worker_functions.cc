#include "worker/worker_functions.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status WorkerFunctions::Register(std::string name, Function fn) {
  absl::MutexLock lock(&mu_);
  if (name.empty()) return absl::InvalidArgumentError("a function needs a name");
  for (const std::string& registered : names_) {
    if (registered == name) {
      return absl::InvalidArgumentError(
          absl::StrCat("function \"", name, "\" is already registered"));
    }
  }
  names_.push_back(std::move(name));
  functions_.push_back(std::move(fn));
  return absl::OkStatus();
}

void WorkerFunctions::SetStatusSource(StatusSource source) {
  absl::MutexLock lock(&mu_);
  status_source_ = std::move(source);
}

absl::StatusOr<RunFunctionResponse> WorkerFunctions::Run(const RunFunctionRequest& request) {
  if (request.arguments().size() > kMaxArgumentsBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "function \"", request.function().substr(0, 64), "\": arguments of ",
        request.arguments().size(), " bytes exceed the limit of ", kMaxArgumentsBytes));
  }
  Function fn;
  bool has_job = false;
  {
    absl::MutexLock lock(&mu_);
    has_job = !functions_.empty();
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == request.function()) fn = functions_[i];
    }
  }
  RunFunctionResponse response;
  if (!fn) {
    // Not an RPC error: the chief would take an unreachable-looking worker for lost and
    // run the chunk elsewhere, where it would fail the same way.
    response.set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
    response.set_message(absl::StrCat(
        "this worker has no function \"", request.function().substr(0, 64), "\"",
        has_job ? "" : " (it has no job yet)"));
    return response;
  }
  absl::StatusOr<std::string> result = fn(request.arguments());
  {
    absl::MutexLock lock(&mu_);
    ++functions_run_;
  }
  if (!result.ok()) {
    response.set_code(static_cast<int>(result.status().code()));
    response.set_message(std::string(result.status().message()));
    return response;
  }
  response.set_result(*std::move(result));
  return response;
}

FunctionWorkerStatusResponse WorkerFunctions::Status() const {
  absl::MutexLock lock(&mu_);
  FunctionWorkerStatusResponse status;
  if (status_source_) status_source_(&status);
  status.set_ready(!functions_.empty());
  status.set_functions_run(functions_run_);
  for (const std::string& name : names_) status.add_functions(name);
  return status;
}

}  // namespace pstrain
