#include "common/data/zipf_ids.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/synthetic.h"
#include "common/memory_budget.h"

namespace pstrain {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A double in [0, 1) from the top 53 bits of one draw.
double UniformDouble01(uint64_t draw) { return static_cast<double>(draw >> 11) * 0x1.0p-53; }

absl::Status CheckOptions(const ZipfIdsOptions& o) {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (o.samples < 1 || o.ids_per_example < 1) {
    return bad("zipf_ids needs samples and ids_per_example >= 1 (got ", o.samples, ", ",
               o.ids_per_example, ")");
  }
  if (o.vocabulary > kMaxZipfVocabulary) {
    return bad("zipf_ids vocabulary ", o.vocabulary, " is over ", kMaxZipfVocabulary,
               " (ids travel as floats, exact up to 2^24)");
  }
  if (o.classes < 2 || o.classes > o.vocabulary) {
    return bad("zipf_ids needs 2 <= classes <= vocabulary (got classes ", o.classes,
               ", vocabulary ", o.vocabulary, ")");
  }
  if (!(o.exponent > 0.0 && o.exponent <= 10.0)) {
    return bad("zipf_ids exponent must be in (0, 10], not ", o.exponent);
  }
  if (!(o.noise >= 0.0 && o.noise <= 1.0)) {
    return bad("zipf_ids noise must be in [0, 1], not ", o.noise);
  }
  if (o.ids_per_example > kMaxSyntheticValues / o.samples) {
    return bad("zipf_ids data of ", o.samples, " x ", o.ids_per_example,
               " ids is too large (limit ", kMaxSyntheticValues, ")");
  }
  return absl::OkStatus();
}

// Zipf draws over the vocabulary: the cumulative weights of the ranks, and the rank ->
// id bijection.
class ZipfSampler {
 public:
  explicit ZipfSampler(const ZipfIdsOptions& o) : vocabulary_(o.vocabulary) {
    cumulative_.resize(o.vocabulary);
    double sum = 0.0;
    for (int64_t r = 0; r < o.vocabulary; ++r) {
      sum += std::pow(static_cast<double>(r + 1), -o.exponent);
      cumulative_[r] = sum;
    }
    stride_ = std::max<int64_t>(1, static_cast<int64_t>(0.618 * o.vocabulary));
    while (std::gcd(stride_, o.vocabulary) != 1) ++stride_;
  }

  int64_t Draw(std::mt19937_64& engine) const {
    const double target = UniformDouble01(engine()) * cumulative_.back();
    const int64_t rank =
        std::upper_bound(cumulative_.begin(), cumulative_.end(), target) - cumulative_.begin();
    const int64_t r = std::min(rank, vocabulary_ - 1);
    // r * stride fits: both are below 2^24.
    return (r * stride_) % vocabulary_;
  }

 private:
  const int64_t vocabulary_;
  std::vector<double> cumulative_;
  int64_t stride_ = 1;
};

}  // namespace

int64_t ZipfIdClass(uint64_t seed, int64_t classes, int64_t id) {
  return static_cast<int64_t>(SplitMix64(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(id)) %
                              static_cast<uint64_t>(classes));
}

absl::StatusOr<Dataset> MakeZipfIdsDataset(const ZipfIdsOptions& o) {
  if (absl::Status ok = CheckOptions(o); !ok.ok()) return ok;
  // The ids and labels, and the sampler's cumulative weights (a double per id).
  if (absl::Status fits = CheckMemoryBudget(
          (o.samples * o.ids_per_example + o.samples) * 4 + o.vocabulary * 8,
          absl::StrCat("zipf_ids data of ", o.samples, " x ", o.ids_per_example,
                       " ids over a vocabulary of ", o.vocabulary));
      !fits.ok()) {
    return fits;
  }
  const ZipfSampler sampler(o);
  std::mt19937_64 engine(o.seed * 1000003 + o.stream);
  Tensor x({o.samples, o.ids_per_example});
  Tensor y({o.samples});
  float* ids = x.data();
  for (int64_t i = 0; i < o.samples; ++i) {
    const int64_t label = static_cast<int64_t>(UniformBelow(engine, static_cast<uint64_t>(o.classes)));
    y.data()[i] = static_cast<float>(label);
    for (int64_t k = 0; k < o.ids_per_example; ++k) {
      int64_t id = sampler.Draw(engine);
      if (UniformDouble01(engine()) >= o.noise) {
        // Conditioned on the label's class; each class holds about 1/classes of the mass,
        // so this takes about `classes` draws.
        while (ZipfIdClass(o.seed, o.classes, id) != label) id = sampler.Draw(engine);
      }
      *ids++ = static_cast<float>(id);
    }
  }
  return Dataset{std::move(x), std::move(y), o.classes};
}

double ZipfOracleAccuracy(const Dataset& data, const ZipfIdsOptions& o) {
  const int64_t n = data.x.shape()[0];
  const int64_t width = data.x.num_elements() / std::max<int64_t>(n, 1);
  std::vector<int64_t> votes(o.classes);
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::fill(votes.begin(), votes.end(), 0);
    for (int64_t k = 0; k < width; ++k) {
      ++votes[ZipfIdClass(o.seed, o.classes, static_cast<int64_t>(data.x.data()[i * width + k]))];
    }
    const int64_t best = std::max_element(votes.begin(), votes.end()) - votes.begin();
    if (best == static_cast<int64_t>(data.y.data()[i])) ++correct;
  }
  return n == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace pstrain
