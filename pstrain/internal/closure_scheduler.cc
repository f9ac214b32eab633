#include "pstrain/internal/closure_scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace pstrain::distribute::internal {

absl::StatusOr<std::vector<double>> ClosureState::Wait() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return result_;
}

bool ClosureState::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

void ClosureState::Finish(absl::StatusOr<std::vector<double>> result) {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  result_ = std::move(result);
  done_ = true;
}

ClosureScheduler::ClosureScheduler(std::vector<FunctionWorkerClient*> workers,
                                   ClosureSchedulerOptions options)
    : workers_(std::move(workers)), options_(options), started_(absl::Now()) {
  {
    absl::MutexLock lock(&mu_);
    states_.resize(workers_.size());
    for (WorkerState& s : states_) s.unusable_since = started_;
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    threads_.emplace_back([this, w] { WorkerLoop(static_cast<int>(w)); });
  }
}

ClosureScheduler::~ClosureScheduler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    FailQueued(absl::CancelledError("the coordinator stopped before this function ran"));
  }
  for (std::thread& t : threads_) t.join();
}

std::shared_ptr<ClosureState> ClosureScheduler::Schedule(RunFunctionRequest request) {
  absl::MutexLock lock(&mu_);
  request.set_closure_id(next_closure_id_++);
  auto closure = std::make_shared<ClosureState>(std::move(request));
  if (stopping_) {
    closure->Finish(absl::CancelledError("the coordinator has stopped"));
    return closure;
  }
  queue_.push_back(closure);
  return closure;
}

absl::Status ClosureScheduler::Join() {
  absl::MutexLock lock(&mu_);
  // Wakes up now and then so a starved queue is noticed even with every worker thread
  // waiting for its worker.
  while (!(queue_.empty() && in_flight_ == 0)) {
    CheckStarved();
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](ClosureScheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                               return s->queue_.empty() && s->in_flight_ == 0;
                             },
                             this),
                         options_.poll_interval);
  }
  absl::Status error = std::move(error_);
  error_ = absl::OkStatus();
  return error;
}

std::vector<int64_t> ClosureScheduler::functions_run() const {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> out;
  for (const WorkerState& s : states_) out.push_back(s.functions_run);
  return out;
}

bool ClosureScheduler::BecomeReady(int w) {
  absl::StatusOr<bool> ready = workers_[w]->Ready();
  absl::MutexLock lock(&mu_);
  WorkerState& s = states_[w];
  if (ready.ok() && *ready) {
    if (s.ever_ready) LogInfo(absl::StrCat(workers_[w]->name(), " is back; it takes functions again"));
    s.ready = true;
    s.ever_ready = true;
    return true;
  }
  s.last_error = ready.ok() ? absl::StrCat(workers_[w]->name(), ": not serving functions yet")
                            : std::string(ready.status().message());
  CheckStarved();
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.poll_interval);
  return false;
}

void ClosureScheduler::WorkerLoop(int w) {
  while (true) {
    bool ready = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      ready = states_[w].ready;
    }
    if (!ready) {
      BecomeReady(w);
      continue;
    }
    std::shared_ptr<ClosureState> closure;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ClosureScheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->stopping_ || !s->queue_.empty();
          },
          this));
      if (stopping_) return;
      closure = queue_.front();
      queue_.pop_front();
      ++in_flight_;
    }
    absl::StatusOr<RunFunctionResponse> response = workers_[w]->Run(closure->request());
    absl::MutexLock lock(&mu_);
    --in_flight_;
    if (response.ok()) {
      Complete(w, closure, *response);
      continue;
    }
    WorkerState& s = states_[w];
    s.ready = false;
    s.unusable_since = absl::Now();
    s.last_error = std::string(response.status().message());
    if (stopping_) {
      closure->Finish(absl::CancelledError("the coordinator stopped before this function ran"));
      continue;
    }
    LogWarning(absl::StrCat(workers_[w]->name(), " lost: ", response.status().message(),
                            "; function \"", closure->request().function(), "\" (closure ",
                            closure->request().closure_id(), ") runs again on another worker"));
    queue_.push_front(std::move(closure));
  }
}

void ClosureScheduler::Complete(int w, const std::shared_ptr<ClosureState>& closure,
                                const RunFunctionResponse& response) {
  ++states_[w].functions_run;
  if (response.code() == 0) {
    closure->Finish(std::vector<double>(response.values().begin(), response.values().end()));
    return;
  }
  const absl::StatusCode code = response.code() > 0 && response.code() <= 16
                                    ? static_cast<absl::StatusCode>(response.code())
                                    : absl::StatusCode::kUnknown;
  const absl::Status failed(code, absl::StrCat("function \"", closure->request().function(),
                                               "\" (closure ", closure->request().closure_id(),
                                               ") on ", workers_[w]->name(), ": ",
                                               response.message()));
  closure->Finish(failed);
  if (!error_.ok()) return;
  error_ = failed;
  // As TensorFlow's coordinator: the functions still queued are cancelled.
  FailQueued(absl::CancelledError(
      absl::StrCat("cancelled: an earlier function failed: ", failed.message())));
}

void ClosureScheduler::FailQueued(const absl::Status& status) {
  for (const std::shared_ptr<ClosureState>& closure : queue_) closure->Finish(status);
  queue_.clear();
}

void ClosureScheduler::CheckStarved() {
  if (queue_.empty()) return;
  absl::Time latest = started_;
  bool any_ever_ready = false;
  std::vector<std::string> errors;
  for (const WorkerState& s : states_) {
    if (s.ready) return;
    latest = std::max(latest, s.unusable_since);
    any_ever_ready = any_ever_ready || s.ever_ready;
    errors.push_back(s.last_error);
  }
  const absl::Duration limit =
      any_ever_ready ? options_.recovery_timeout : options_.startup_timeout;
  if (absl::Now() - latest < limit) return;
  const absl::Status starved = absl::UnavailableError(
      absl::StrCat("no worker could run functions for ", absl::FormatDuration(limit), ": ",
                   absl::StrJoin(errors, "; ")));
  if (error_.ok()) error_ = starved;
  FailQueued(starved);
}

}  // namespace pstrain::distribute::internal
