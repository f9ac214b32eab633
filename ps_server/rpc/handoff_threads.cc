#include "ps_server/rpc/handoff_threads.h"

#include <utility>

namespace pstrain {

HandoffThreads::~HandoffThreads() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.SignalAll();
    threads = std::move(threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

void HandoffThreads::Run(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  // Each idle thread takes one queued task; a task beyond them gets a thread of
  // its own, so that it never waits behind a call that blocks.
  if (idle_ >= static_cast<int>(tasks_.size())) {
    work_.Signal();
  } else {
    threads_.emplace_back([this] { Loop(); });
  }
}

int HandoffThreads::threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

int HandoffThreads::idle_threads() const {
  absl::MutexLock lock(&mu_);
  return idle_;
}

void HandoffThreads::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    while (tasks_.empty() && !stopping_) {
      ++idle_;
      work_.Wait(&mu_);
      --idle_;
    }
    if (tasks_.empty()) return;  // stopping, with nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    task = nullptr;  // what it captured goes before the lock is taken again
    mu_.Lock();
  }
}

}  // namespace pstrain
