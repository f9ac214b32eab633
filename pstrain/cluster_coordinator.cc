#include "pstrain/cluster_coordinator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pstrain/internal/chief_task.h"
#include "pstrain/internal/function_closure.h"
#include "pstrain/internal/role_task.h"

namespace pstrain::distribute {

absl::StatusOr<std::unique_ptr<ClusterCoordinator>> ClusterCoordinator::Create(
    Strategy* strategy) {
  if (strategy == nullptr || strategy->parameter_server_task() == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClusterCoordinator works with the parameter_server strategy, not ",
        strategy == nullptr ? std::string("none") : strategy->name()));
  }
  return std::unique_ptr<ClusterCoordinator>(
      new ClusterCoordinator(strategy->parameter_server_task()));
}

absl::StatusOr<PerWorkerIterator> ClusterCoordinator::CreatePerWorkerIterator(
    const IteratorFactory& make_iterator) {
  std::unique_ptr<DistributedIterator> iterator;
  if (task_->role() == Role::kWorker) {
    PS_ASSIGN_OR_RETURN(iterator, make_iterator(task_->config().task.index));
    if (iterator == nullptr) {
      return absl::InvalidArgumentError("the per-worker iterator factory returned none");
    }
  }
  PerWorkerIterator handle;
  handle.index = task_->function_runner()->AddIterator(std::move(iterator));
  return handle;
}

int ClusterCoordinator::RegisterFunction(
    const std::string& name,
    std::function<absl::StatusOr<std::vector<double>>(DistributedIterator&)> fn) {
  return task_->function_runner()->RegisterFunction(name, std::move(fn));
}

std::shared_ptr<internal::FunctionClosure> ClusterCoordinator::ScheduleFunction(
    int index, const std::string& name, int iterator) {
  RunFunctionRequest request;
  request.set_function_index(index);
  request.set_function(name);
  request.set_iterator_index(iterator);
  internal::ChiefTask* chief = task_->chief();
  if (chief == nullptr) {
    auto refused = std::make_shared<internal::FunctionClosure>(
        std::move(request), std::vector<internal::FunctionWorkerClient*>());
    refused->Finish(absl::FailedPreconditionError(absl::StrCat(
        "only the chief schedules functions; this is ", TaskIdToString(task_->config().task))));
    return refused;
  }
  request.set_placement_fingerprint(chief->placement_fingerprint());
  auto closure =
      std::make_shared<internal::FunctionClosure>(std::move(request), chief->worker_clients());
  chief->scheduler()->Schedule(closure);
  return closure;
}

absl::Status ClusterCoordinator::Join() {
  internal::ChiefTask* chief = task_->chief();
  if (chief == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "only the chief joins scheduled functions; this is ",
        TaskIdToString(task_->config().task)));
  }
  return chief->scheduler()->Join();
}

absl::Status ClusterCoordinator::Serve() {
  if (task_->role() != Role::kWorker) {
    return absl::FailedPreconditionError(absl::StrCat(
        "only workers serve scheduled functions; this is ",
        TaskIdToString(task_->config().task)));
  }
  return task_->Serve();
}

std::vector<int64_t> ClusterCoordinator::functions_run_per_worker() const {
  internal::ChiefTask* chief = task_->chief();
  if (chief == nullptr) return {};
  return chief->scheduler()->closures_run();
}

std::vector<MemberStatus> ClusterCoordinator::members() const {
  internal::ChiefTask* chief = task_->chief();
  if (chief == nullptr) return {};
  return chief->membership().Snapshot();
}

absl::StatusOr<std::vector<double>> ClusterCoordinator::WaitFor(
    const internal::FunctionClosure& state) {
  return state.Wait();
}

bool ClusterCoordinator::IsDone(const internal::FunctionClosure& state) { return state.done(); }

}  // namespace pstrain::distribute
