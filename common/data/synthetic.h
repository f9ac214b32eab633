#ifndef PSTRAIN_COMMON_DATA_SYNTHETIC_H_
#define PSTRAIN_COMMON_DATA_SYNTHETIC_H_

// The seed program's synthetic data (np.random.random((N, F)), np.random.randint(C, size=N)):
// features uniform in [0, 1), labels uniform class ids. Deterministic from the seed and
// identical on every platform: the generator is std::mt19937_64 (fully specified by the
// standard) and the distributions are implemented here, since std::uniform_*_distribution
// may differ between standard libraries. Not numpy's stream: only its distribution.

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"

namespace pstrain {

struct SyntheticOptions {
  int64_t samples = 1000;
  int64_t features = 784;
  int64_t classes = 10;
  uint64_t seed = 0;
};

// Largest samples * features accepted (1 GiB of floats), so a typo in a job spec cannot
// exhaust memory.
inline constexpr int64_t kMaxSyntheticValues = int64_t{1} << 28;

// x: [samples, features], y: [samples] class ids, num_classes = classes.
// Errors: InvalidArgument when samples < 1, features < 1, classes < 1, or
// samples * features > kMaxSyntheticValues.
absl::StatusOr<Dataset> MakeSyntheticDataset(const SyntheticOptions& options);

// The two distributions, exposed for tests and for other deterministic data.
// A float in [0, 1) from the top 24 bits of one draw (every value exactly representable).
float UniformFloat01(uint64_t draw);
// An integer in [0, n) without modulo bias (rejection sampling); n >= 1.
template <typename Engine>
uint64_t UniformBelow(Engine& engine, uint64_t n) {
  // Reject the top partial range so every residue is equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t draw;
  do {
    draw = engine();
  } while (draw >= limit);
  return draw % n;
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_SYNTHETIC_H_
