#include "common/data/synthetic.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/memory_budget.h"

namespace pstrain {

float UniformFloat01(uint64_t draw) {
  return static_cast<float>(draw >> 40) * (1.0f / 16777216.0f);
}

absl::StatusOr<Dataset> MakeSyntheticDataset(const SyntheticOptions& options) {
  if (options.samples < 1 || options.features < 1 || options.classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic data needs samples, features and classes >= 1 (got ",
                     options.samples, ", ", options.features, ", ", options.classes, ")"));
  }
  if (options.features > kMaxSyntheticValues / options.samples) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic data of ", options.samples, " x ",
                                                   options.features, " values is too large (limit ",
                                                   kMaxSyntheticValues, ")"));
  }
  if (absl::Status fits = CheckMemoryBudget(
          (options.samples * options.features + options.samples) * 4,
          absl::StrCat("synthetic data of ", options.samples, " x ", options.features, " values"));
      !fits.ok()) {
    return fits;
  }
  std::mt19937_64 engine(options.seed);
  Tensor x({options.samples, options.features});
  for (float& v : x.values()) v = UniformFloat01(engine());
  Tensor y({options.samples});
  for (float& v : y.values()) {
    v = static_cast<float>(UniformBelow(engine, static_cast<uint64_t>(options.classes)));
  }
  return Dataset{std::move(x), std::move(y), options.classes};
}

}  // namespace pstrain
