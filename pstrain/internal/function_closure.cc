#include "pstrain/internal/function_closure.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain::distribute::internal {

absl::StatusOr<std::vector<double>> FunctionClosure::Wait() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return result_;
}

bool FunctionClosure::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

std::string FunctionClosure::Describe() const {
  return absl::StrCat("function \"", request_.function(), "\" (closure ", id(), ")");
}

absl::Status FunctionClosure::Run(int worker) {
  RunFunctionRequest request = request_;
  request.set_closure_id(id());
  absl::StatusOr<RunFunctionResponse> response = workers_[worker]->Run(request);
  if (!response.ok()) return response.status();
  if (response->code() != 0) {
    const absl::StatusCode code = response->code() > 0 && response->code() <= 16
                                      ? static_cast<absl::StatusCode>(response->code())
                                      : absl::StatusCode::kUnknown;
    return absl::Status(code, absl::StrCat(Describe(), " on ", workers_[worker]->name(), ": ",
                                           response->message()));
  }
  absl::MutexLock lock(&mu_);
  values_.assign(response->values().begin(), response->values().end());
  return absl::OkStatus();
}

void FunctionClosure::Finish(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  if (status.ok()) {
    result_ = std::move(values_);
  } else {
    result_ = std::move(status);
  }
  done_ = true;
}

}  // namespace pstrain::distribute::internal
