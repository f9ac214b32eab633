#include "common/parallel.h"

#include <thread>

namespace pstrain {

absl::Status RunConcurrently(const std::vector<std::function<absl::Status()>>& tasks) {
  if (tasks.empty()) return absl::OkStatus();
  std::vector<absl::Status> results(tasks.size());
  std::vector<std::thread> threads;
  threads.reserve(tasks.size() - 1);
  for (size_t i = 1; i < tasks.size(); ++i) {
    threads.emplace_back([&tasks, &results, i] { results[i] = tasks[i](); });
  }
  results[0] = tasks[0]();
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace pstrain
