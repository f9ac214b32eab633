#include "ps_server/client/exchange_threads.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {

ExchangeThreads::ExchangeThreads(size_t lanes) {
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < lanes; ++i) lanes_.push_back(std::make_unique<Lane>());
  }
  threads_.reserve(lanes);
  for (size_t i = 0; i < lanes; ++i) threads_.emplace_back([this, i] { Loop(i); });
}

ExchangeThreads::~ExchangeThreads() {
  {
    absl::MutexLock lock(&mu_);
    // A round in flight still writes into its caller's buffers: let it end first.
    while (pending_ > 0) done_.Wait(&mu_);
    stopping_ = true;
    for (const std::unique_ptr<Lane>& lane : lanes_) lane->work.Signal();
  }
  for (std::thread& t : threads_) t.join();
}

void ExchangeThreads::Loop(size_t i) {
  mu_.Lock();
  Lane& lane = *lanes_[i];
  while (true) {
    while (!lane.has_task && !stopping_) lane.work.Wait(&mu_);
    if (!lane.has_task) break;  // stopping, nothing left to run
    Task task = std::move(lane.task);
    mu_.Unlock();
    absl::Status result = task();
    task = nullptr;  // whatever it captured goes before the round is reported done
    mu_.Lock();
    lane.result = std::move(result);
    lane.has_task = false;
    if (--pending_ == 0) done_.SignalAll();
  }
  mu_.Unlock();
}

absl::Status ExchangeThreads::StartLocked(std::vector<Task>& tasks, size_t skip) {
  if (in_flight_) {
    return absl::FailedPreconditionError("an exchange round is already in flight");
  }
  if (tasks.size() > lanes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tasks.size(), " tasks for ", lanes_.size(), " exchange threads"));
  }
  in_flight_ = true;
  for (size_t i = 0; i < tasks.size(); ++i) {
    Lane& lane = *lanes_[i];
    lane.in_round = tasks[i] != nullptr;
    lane.result = absl::OkStatus();
    if (!lane.in_round || i == skip) continue;
    lane.task = std::move(tasks[i]);
    lane.has_task = true;
    ++pending_;
    lane.work.Signal();
  }
  return absl::OkStatus();
}

absl::Status ExchangeThreads::Start(std::vector<Task> tasks) {
  absl::MutexLock lock(&mu_);
  return StartLocked(tasks, tasks.size());
}

bool ExchangeThreads::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

absl::Status ExchangeThreads::Wait() {
  absl::MutexLock lock(&mu_);
  while (pending_ > 0) done_.Wait(&mu_);
  if (!in_flight_) return absl::OkStatus();
  in_flight_ = false;
  absl::Status first;
  for (const std::unique_ptr<Lane>& lane : lanes_) {
    if (!lane->in_round) continue;
    lane->in_round = false;
    if (first.ok()) first = lane->result;
  }
  return first;
}

absl::Status ExchangeThreads::Run(std::vector<Task> tasks) {
  size_t mine = 0;
  while (mine < tasks.size() && tasks[mine] == nullptr) ++mine;
  {
    absl::MutexLock lock(&mu_);
    absl::Status started = StartLocked(tasks, mine);
    if (!started.ok()) return started;
  }
  if (mine < tasks.size()) {
    absl::Status result = tasks[mine]();
    absl::MutexLock lock(&mu_);
    lanes_[mine]->result = std::move(result);
  }
  return Wait();
}

}  // namespace pstrain
