#include "distribute/mirrored_strategy.h"

#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/math/backend_factory.h"

namespace pstrain {

absl::StatusOr<std::vector<std::string>> ParseMirroredDevices(absl::string_view devices) {
  std::vector<std::string> out;
  if (absl::StripAsciiWhitespace(devices).empty()) {
    const int gpus = CudaDeviceCount();
    for (int i = 0; i < gpus; ++i) out.push_back(absl::StrCat("cuda:", i));
    if (out.empty()) out.push_back("cpu:0");
    return out;
  }
  std::set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(devices, ',')) {
    const std::string d(absl::StripAsciiWhitespace(part));
    const std::vector<std::string> kind_index = absl::StrSplit(d, ':');
    int index = -1;
    if (kind_index.size() != 2 || (kind_index[0] != "cpu" && kind_index[0] != "cuda") ||
        !absl::SimpleAtoi(kind_index[1], &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device \"", d, "\" is not cpu:N or cuda:N (e.g. --devices=cpu:0,cpu:1)"));
    }
    const std::string canonical = absl::StrCat(kind_index[0], ":", index);
    if (!seen.insert(canonical).second) {
      return absl::InvalidArgumentError(absl::StrCat("device ", canonical, " named twice"));
    }
    out.push_back(canonical);
  }
  return out;
}

std::string BackendDeviceFor(const std::string& device) {
  return absl::StartsWith(device, "cpu") ? "cpu" : device;
}

MirroredStrategy::MirroredStrategy(std::vector<std::string> devices)
    : devices_(std::move(devices)) {
  results_.resize(devices_.size());
  for (size_t r = 1; r < devices_.size(); ++r) {
    threads_.emplace_back([this, r] { ReplicaLoop(static_cast<int>(r)); });
  }
}

MirroredStrategy::~MirroredStrategy() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void MirroredStrategy::ReplicaLoop(int replica) {
  struct Waiter {
    MirroredStrategy* self;
    int64_t seen;
  } waiter{this, 0};
  while (true) {
    const std::function<absl::Status(int)>* fn = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Waiter* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return w->self->stopping_ || w->self->generation_ != w->seen;
          },
          &waiter));
      if (stopping_) return;
      waiter.seen = generation_;
      fn = step_fn_;
    }
    absl::Status status = (*fn)(replica);
    absl::MutexLock lock(&mu_);
    results_[replica] = std::move(status);
    --pending_;
  }
}

absl::Status MirroredStrategy::Run(const std::function<absl::Status(int replica)>& step_fn) {
  {
    absl::MutexLock lock(&mu_);
    step_fn_ = &step_fn;
    pending_ = static_cast<int>(devices_.size()) - 1;
    for (absl::Status& s : results_) s = absl::OkStatus();
    ++generation_;
  }
  absl::Status first = step_fn(0);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](MirroredStrategy* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->pending_ == 0; },
      this));
  step_fn_ = nullptr;
  if (!first.ok()) return first;
  for (size_t r = 1; r < results_.size(); ++r) {
    if (!results_[r].ok()) return results_[r];
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MirroredStrategy>> CreateMirroredStrategy(
    absl::string_view devices) {
  absl::StatusOr<std::vector<std::string>> parsed = ParseMirroredDevices(devices);
  if (!parsed.ok()) return parsed.status();
  return std::make_unique<MirroredStrategy>(*std::move(parsed));
}

}  // namespace pstrain
