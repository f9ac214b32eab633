#ifndef PSTRAIN_COMMON_MODEL_ROW_INITIALIZER_H_
#define PSTRAIN_COMMON_MODEL_ROW_INITIALIZER_H_

// A variable's initial values drawn row by row: row r of a variable (its slice along the
// first axis; a rank-0 variable is one row) is drawn from its own small generator seeded
// by (the variable's seed, r) and nothing else. So a variable's values do not depend on
// how it is split: a ps that holds rows [a, b) of a table draws exactly the values the
// one-process trainer draws for those rows, without anyone holding the whole table, and
// a ps that comes back empty draws them again.
//
// A RowInitializer is what a Keras initializer (common/model/layers/initializer.h)
// resolves to for one variable: a distribution whose parameters are already worked out
// from the variable's shape (a VarianceScaling's fans are a standard deviation or a
// limit here), and the variable's seed. It is what the chief sends a ps in
// CreateVariables (proto/ps.proto InitializerSpec) instead of the values.
//
// Everything here is a pure function of its arguments: safe from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/tensor.h"

namespace pstrain {

enum class InitialDistribution {
  kConstant,         // every value a
  kNormal,           // a + b * N(0, 1)
  kTruncatedNormal,  // a + b * N(0, 1) redrawn outside [-2, 2], as TensorFlow does
  kUniform,          // a + (b - a) * U[0, 1)
};

struct RowInitializer {
  InitialDistribution distribution = InitialDistribution::kConstant;
  // kConstant: the value; kNormal, kTruncatedNormal: the mean; kUniform: the low end.
  double a = 0.0;
  // kNormal, kTruncatedNormal: the standard deviation; kUniform: the high end.
  double b = 0.0;
  // The variable's seed (VariableSeed, or a Keras initializer's own seed): row r draws
  // from MixSeed(seed, r).
  uint64_t seed = 0;
  // The whole variable's shape, whichever rows are drawn.
  std::vector<int64_t> shape;

  bool operator==(const RowInitializer& o) const {
    return distribution == o.distribution && a == o.a && b == o.b && seed == o.seed &&
           shape == o.shape;
  }
};

// Rows [row_begin, row_end) of the variable `init` draws, held under `name` (a shard
// "<variable>/part_<i>", or the whole variable under its own name).
struct InitialShard {
  std::string name;
  RowInitializer init;
  int64_t row_begin = 0;
  int64_t row_end = 0;
};

// Most dimensions a variable drawn here may have (Keras's largest kernels have 5).
inline constexpr int kMaxInitializerRank = 8;

// A 64-bit stream id derived from (seed, index) (SplitMix64's finaliser): distinct
// indices get unrelated streams from one seed.
uint64_t MixSeed(uint64_t seed, uint64_t index);

// The seed of the variable named `name` (its model name, "dense/kernel") in a job of
// seed `job_seed`: a stable hash of the name (FNV-1a, the same on every machine and
// build) mixed with the job seed, so every variable draws from a stream of its own.
uint64_t VariableSeed(uint64_t job_seed, absl::string_view name);

// The shape rows [row_begin, row_end) of a variable of `shape` have: [row_end -
// row_begin, shape[1], ...]; `shape` itself ([]) for a rank-0 variable.
std::vector<int64_t> RowRangeShape(const std::vector<int64_t>& shape, int64_t row_begin,
                                   int64_t row_end);

// Checks `shard` as a ps must check one from the network, before it allocates anything:
// the rank at most kMaxInitializerRank, every dimension >= 1 and the element count
// without overflow (at most kMaxTensorElements); 0 <= row_begin < row_end <= rows (1
// for a rank-0 variable); a and b finite and such that every value drawn is a finite
// float (kConstant |a| <= FLT_MAX; kNormal, kTruncatedNormal b >= 0 and |a| + 10 b <=
// FLT_MAX; kUniform a <= b, both within +-FLT_MAX).
// Errors: INVALID_ARGUMENT naming what is wrong (the caller names the variable).
absl::Status ValidateRowRange(const RowInitializer& init, int64_t row_begin, int64_t row_end);

// Writes rows [row_begin, row_end) of `init`'s variable into `out`, which holds exactly
// their elements. Requires ValidateRowRange(init, row_begin, row_end) to pass.
void FillRows(const RowInitializer& init, int64_t row_begin, int64_t row_end,
              absl::Span<float> out);

// `shard`'s rows as a tensor of RowRangeShape.
// Errors: ValidateRowRange's, prefixed with the shard's name.
absl::StatusOr<Tensor> DrawShard(const InitialShard& shard);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_MODEL_ROW_INITIALIZER_H_
