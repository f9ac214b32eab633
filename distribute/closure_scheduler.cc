#include "distribute/closure_scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "distribute/failure.h"

namespace pstrain::distribute {
namespace {

// `message` without a leading "<name>: ", for a log line that names the worker itself.
absl::string_view Unprefixed(absl::string_view message, const std::string& name) {
  return absl::StripPrefix(message, absl::StrCat(name, ": "));
}

}  // namespace

ClosureScheduler::ClosureScheduler(std::vector<ScheduledWorker*> workers,
                                   ClosureSchedulerOptions options)
    : workers_(std::move(workers)), options_(std::move(options)), started_(absl::Now()) {
  {
    absl::MutexLock lock(&mu_);
    states_.resize(workers_.size());
    for (WorkerState& s : states_) s.unusable_since = started_;
    queued_since_ = started_;
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    threads_.emplace_back([this, w] { WorkerLoop(static_cast<int>(w)); });
  }
}

ClosureScheduler::~ClosureScheduler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    FailQueued(absl::CancelledError("the coordinator stopped before this closure ran"));
  }
  for (std::thread& t : threads_) t.join();
}

void ClosureScheduler::Schedule(std::shared_ptr<Closure> closure) {
  absl::MutexLock lock(&mu_);
  closure->id_ = next_id_++;
  if (stopping_) {
    closure->Finish(absl::CancelledError("the coordinator has stopped"));
    return;
  }
  if (queue_.empty()) queued_since_ = absl::Now();
  queue_.push_back(std::move(closure));
}

absl::Status ClosureScheduler::Join() {
  absl::MutexLock lock(&mu_);
  // Wakes up now and then so a starved queue is noticed even with every worker thread
  // waiting for its worker.
  while (!Idle()) {
    CheckStarved();
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](ClosureScheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                               return s->Idle();
                             },
                             this),
                         options_.poll_interval);
  }
  absl::Status error = std::move(error_);
  error_ = absl::OkStatus();
  return error;
}

std::vector<int64_t> ClosureScheduler::closures_run() const {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> out;
  for (const WorkerState& s : states_) out.push_back(s.closures_run);
  return out;
}

int64_t ClosureScheduler::ps_recoveries() const {
  absl::MutexLock lock(&mu_);
  return ps_recoveries_;
}

bool ClosureScheduler::BecomeReady(int w) {
  absl::StatusOr<bool> ready = workers_[w]->Ready();
  absl::MutexLock lock(&mu_);
  WorkerState& s = states_[w];
  if (ready.ok() && *ready) {
    if (s.ever_ready) LogInfo(absl::StrCat(workers_[w]->name(), " is back; it takes work again"));
    s.ready = true;
    s.ever_ready = true;
    return true;
  }
  s.last_error = ready.ok() ? absl::StrCat(workers_[w]->name(), ": not ready to take work yet")
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
    std::shared_ptr<Closure> closure;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ClosureScheduler* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->stopping_ || s->CanDispatch();
          },
          this));
      if (stopping_) return;
      closure = queue_.front();
      queue_.pop_front();
      ++in_flight_;
    }
    absl::Status status = closure->Run(w);
    if (ClassifyFailure(status) == FailureKind::kWorkerLost && options_.on_worker_lost) {
      options_.on_worker_lost(w, status);
    }
    absl::MutexLock lock(&mu_);
    --in_flight_;
    // The status moves on (to the closure, to Join): this thread keeps no reference to
    // it once the closure is finished and its waiter may hold it.
    Complete(w, std::move(closure), std::move(status));
    MaybeRecoverPs();
  }
}

void ClosureScheduler::Complete(int w, std::shared_ptr<Closure> closure, absl::Status status) {
  const std::string& name = workers_[w]->name();
  switch (ClassifyFailure(status)) {
    case FailureKind::kNone:
      ++states_[w].closures_run;
      closure->Finish(std::move(status));
      return;
    case FailureKind::kFunctionError:
      ++states_[w].closures_run;
      Fail(closure, std::move(status));
      return;
    case FailureKind::kWorkerLost: {
      WorkerState& s = states_[w];
      s.ready = false;
      s.unusable_since = absl::Now();
      s.last_error = std::string(status.message());
      if (stopping_) {
        closure->Finish(absl::CancelledError(absl::StrCat(
            "the coordinator stopped before this closure ran: ", status.message())));
        return;
      }
      LogWarning(absl::StrCat(name, " lost: ", Unprefixed(status.message(), name), "; ",
                              closure->WhenRequeued()));
      Requeue(std::move(closure));
      return;
    }
    case FailureKind::kPsFailed:
      if (!options_.recover_ps) {
        Fail(closure, std::move(status));
        return;
      }
      if (stopping_) {
        closure->Finish(absl::CancelledError(absl::StrCat(
            "the coordinator stopped before this closure ran: ", status.message())));
        return;
      }
      // The worker is fine but a ps is not: the closures in flight come back, the ps is
      // recovered once, then this one runs again first.
      LogWarning(absl::StrCat(Unprefixed(status.message(), name), " (reported by ", name,
                              "); training pauses"));
      ps_paused_ = true;
      Requeue(std::move(closure));
      return;
  }
}

void ClosureScheduler::Fail(const std::shared_ptr<Closure>& closure, absl::Status status) {
  if (error_.ok()) {
    error_ = status;
    // As TensorFlow's coordinator: the closures still queued are cancelled.
    FailQueued(absl::CancelledError(absl::StrCat("cancelled: an earlier closure failed: ",
                                                 status.message())));
  }
  closure->Finish(std::move(status));
}

void ClosureScheduler::Requeue(std::shared_ptr<Closure> closure) {
  if (queue_.empty()) queued_since_ = absl::Now();
  queue_.push_front(std::move(closure));
}

void ClosureScheduler::MaybeRecoverPs() {
  if (!ps_paused_ || in_flight_ > 0 || recovering_ || stopping_) return;
  recovering_ = true;
  ++ps_recoveries_;
  mu_.Unlock();
  const absl::Status recovered = options_.recover_ps();
  mu_.Lock();
  recovering_ = false;
  ps_paused_ = false;
  if (recovered.ok()) return;
  FailQueued(recovered);
  if (error_.ok()) error_ = std::move(recovered);
}

void ClosureScheduler::FailQueued(const absl::Status& status) {
  for (const std::shared_ptr<Closure>& closure : queue_) closure->Finish(status);
  queue_.clear();
}

void ClosureScheduler::CheckStarved() {
  // Paused for a ps (its recovery has a timeout of its own): the workers are not the
  // reason nothing runs.
  if (queue_.empty() || ps_paused_) return;
  absl::Time latest = std::max(started_, queued_since_);
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
      absl::StrCat("no worker could run closures for ", absl::FormatDuration(limit), ": ",
                   absl::StrJoin(errors, "; ")));
  if (error_.ok()) error_ = starved;
  FailQueued(starved);
}

}  // namespace pstrain::distribute
