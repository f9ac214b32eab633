#include "distribute/strategy.h"

#include <cstddef>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<std::vector<float>> Strategy::Reduce(
    ReduceOp op, absl::Span<const absl::Span<const float>> per_replica) const {
  const int replicas = num_local_replicas();
  if (static_cast<int>(per_replica.size()) != replicas) {
    return absl::InvalidArgumentError(absl::StrCat("Reduce got ", per_replica.size(),
                                                   " values for ", replicas,
                                                   " local replicas"));
  }
  if (per_replica.empty()) return std::vector<float>();
  const size_t n = per_replica[0].size();
  for (size_t r = 1; r < per_replica.size(); ++r) {
    if (per_replica[r].size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("Reduce: replica ", r, " has ",
                                                     per_replica[r].size(),
                                                     " values, replica 0 has ", n));
    }
  }
  std::vector<float> out(per_replica[0].begin(), per_replica[0].end());
  for (size_t r = 1; r < per_replica.size(); ++r) {
    const float* v = per_replica[r].data();
    for (size_t i = 0; i < n; ++i) out[i] += v[i];
  }
  if (op == ReduceOp::kMean && replicas > 1) {
    const float inv = 1.0f / static_cast<float>(replicas);
    for (float& v : out) v *= inv;
  }
  return out;
}

absl::Status DefaultStrategy::Run(const std::function<absl::Status(int replica)>& step_fn) {
  return step_fn(0);
}

std::unique_ptr<Strategy> CreateDefaultStrategy() { return std::make_unique<DefaultStrategy>(); }

}  // namespace pstrain
