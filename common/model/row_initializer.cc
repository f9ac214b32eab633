#include "common/model/row_initializer.h"

#include <cfloat>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// One row's generator: SplitMix64, a counter-based stream (value k is a hash of seed + k
// steps), so seeding one per row costs nothing and rows never share state. Our own
// distributions, so values do not depend on the standard library.
class RowRng {
 public:
  explicit RowRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // [0, 1), 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Normal() {  // Box-Muller; |result| <= sqrt(-2 ln 2^-53) < 8.6
    double u1 = Uniform();
    while (u1 <= 0.0) u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double TruncatedNormal() {  // re-draw outside two standard deviations, as TF does
    for (;;) {
      const double z = Normal();
      if (std::fabs(z) <= 2.0) return z;
    }
  }

 private:
  uint64_t state_;
};

int64_t RowsOf(const std::vector<int64_t>& shape) { return shape.empty() ? 1 : shape[0]; }

// Elements per row; the shape is valid (ValidateRowRange).
int64_t RowSize(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

absl::Status CheckParameters(const RowInitializer& init) {
  if (!std::isfinite(init.a) || !std::isfinite(init.b)) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer parameters must be finite, got ", init.a, " and ", init.b));
  }
  constexpr double kMax = FLT_MAX;
  switch (init.distribution) {
    case InitialDistribution::kConstant:
      if (std::fabs(init.a) > kMax) {
        return absl::InvalidArgumentError(
            absl::StrCat("constant initial value ", init.a, " is not a finite float"));
      }
      return absl::OkStatus();
    case InitialDistribution::kNormal:
    case InitialDistribution::kTruncatedNormal:
      // A normal draw stays within 8.6 standard deviations (RowRng::Normal).
      if (init.b < 0.0 || std::fabs(init.a) + 10.0 * init.b > kMax) {
        return absl::InvalidArgumentError(absl::StrCat(
            "normal initializer with mean ", init.a, " and stddev ", init.b,
            ": the stddev must be >= 0 and the values finite floats"));
      }
      return absl::OkStatus();
    case InitialDistribution::kUniform:
      if (!(init.a <= init.b) || std::fabs(init.a) > kMax || std::fabs(init.b) > kMax) {
        return absl::InvalidArgumentError(absl::StrCat(
            "uniform initializer over [", init.a, ", ", init.b,
            "): minval must not exceed maxval, and both must be finite floats"));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown initializer distribution");
}

}  // namespace

uint64_t MixSeed(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + (index + 1) * 0xD1B54A32D192ED03ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t VariableSeed(uint64_t job_seed, absl::string_view name) {
  uint64_t hash = 0xCBF29CE484222325ULL;  // FNV-1a, 64 bits
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001B3ULL;
  }
  return MixSeed(job_seed, hash);
}

std::vector<int64_t> RowRangeShape(const std::vector<int64_t>& shape, int64_t row_begin,
                                   int64_t row_end) {
  std::vector<int64_t> out = shape;
  if (!out.empty()) out[0] = row_end - row_begin;
  return out;
}

absl::Status ValidateRowRange(const RowInitializer& init, int64_t row_begin, int64_t row_end) {
  if (init.shape.size() > static_cast<size_t>(kMaxInitializerRank)) {
    return absl::InvalidArgumentError(absl::StrCat("a variable of rank ", init.shape.size(),
                                                   "; at most ", kMaxInitializerRank,
                                                   " dimensions are drawn"));
  }
  for (int64_t d : init.shape) {
    if (d < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable shape ", ShapeToString(init.shape), " has a dimension below 1"));
    }
  }
  const int64_t n = NumElements(init.shape);
  if (n < 0 || n > kMaxTensorElements) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable shape ", ShapeToString(init.shape), " has too many elements"));
  }
  const int64_t rows = RowsOf(init.shape);
  if (row_begin < 0 || row_begin >= row_end || row_end > rows) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", row_begin, ", ", row_end,
                                                   ") are not a range within the variable's ",
                                                   rows, " rows"));
  }
  return CheckParameters(init);
}

void FillRows(const RowInitializer& init, int64_t row_begin, int64_t row_end,
              absl::Span<float> out) {
  const int64_t row_size = RowSize(init.shape);
  float* next = out.data();
  for (int64_t r = row_begin; r < row_end; ++r) {
    RowRng rng(MixSeed(init.seed, static_cast<uint64_t>(r)));
    float* const end = next + row_size;
    switch (init.distribution) {
      case InitialDistribution::kConstant:
        for (; next < end; ++next) *next = static_cast<float>(init.a);
        break;
      case InitialDistribution::kNormal:
        for (; next < end; ++next) *next = static_cast<float>(init.a + init.b * rng.Normal());
        break;
      case InitialDistribution::kTruncatedNormal:
        for (; next < end; ++next) {
          *next = static_cast<float>(init.a + init.b * rng.TruncatedNormal());
        }
        break;
      case InitialDistribution::kUniform:
        for (; next < end; ++next) {
          *next = static_cast<float>(init.a + (init.b - init.a) * rng.Uniform());
        }
        break;
    }
  }
}

absl::StatusOr<Tensor> DrawShard(const InitialShard& shard) {
  if (absl::Status valid = ValidateRowRange(shard.init, shard.row_begin, shard.row_end);
      !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer of \"", shard.name, "\": ", valid.message()));
  }
  Tensor out(RowRangeShape(shard.init.shape, shard.row_begin, shard.row_end));
  FillRows(shard.init, shard.row_begin, shard.row_end, out.values());
  return out;
}

}  // namespace pstrain
