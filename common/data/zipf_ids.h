#ifndef PSTRAIN_COMMON_DATA_ZIPF_IDS_H_
#define PSTRAIN_COMMON_DATA_ZIPF_IDS_H_

// Synthetic categorical data for embedding models: each example is `ids_per_example`
// integer ids (carried as floats, as an Embedding layer takes them) from a vocabulary of
// `vocabulary` ids whose frequencies follow a Zipf law, and a class label the ids carry.
// It stands for what large embedding tables are for (words, items, users): a few ids are
// very frequent, most are rare.
//
// The generator, fully determined by its options (std::mt19937_64 and the arithmetic
// below, identical on every platform):
//   * Every id v has a hidden class  h(v) = SplitMix64(seed * 0x9E3779B97F4A7C15 + v) mod
//     classes  (SplitMix64: Steele, Lea and Flood's finaliser), so the classes split the
//     vocabulary evenly at random and the same seed gives the same classes in every split.
//   * Popularity: the id of popularity rank r (r = 0 most frequent) is
//     v = (r * stride) mod vocabulary, stride the first integer >= 0.618 * vocabulary that
//     is coprime to it: a bijection that scatters the frequent ids over the whole table
//     (and so over its row shards), as hashed ids would be. P(rank r) is proportional to
//     (r + 1)^-exponent.
//   * An example draws its label c uniformly from the classes; then each of its ids is,
//     with probability 1 - noise, a Zipf draw conditioned on h(v) = c (rejection: Zipf
//     draws until one has class c), and otherwise (probability noise) a plain Zipf draw.
//   The draws come from std::mt19937_64 seeded with seed * 1000003 + stream, so a
//   validation set is the same world (same h, same popularity) with another stream.
//
// A model that knew h would label an example by the class most of its ids have (ties to
// the lowest): OracleAccuracy measures that bound on a dataset. A model must learn h from
// the examples, and ids seen rarely in training stay near their random initial rows, so
// with a heavy tail it stays below the bound; how far depends on the exponent and the
// training it gets.

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"

namespace pstrain {

struct ZipfIdsOptions {
  int64_t samples = 10000;
  int64_t ids_per_example = 8;
  int64_t vocabulary = 1000000;
  int64_t classes = 10;
  double exponent = 1.1;
  double noise = 0.3;
  uint64_t seed = 0;
  uint64_t stream = 0;
};

// Ids travel as floats, exact up to 2^24: the largest vocabulary accepted.
inline constexpr int64_t kMaxZipfVocabulary = int64_t{1} << 24;

// x: [samples, ids_per_example] ids, y: [samples] class ids, num_classes = classes.
// Errors: INVALID_ARGUMENT samples, ids_per_example < 1; classes < 2 or > vocabulary;
// vocabulary > kMaxZipfVocabulary; exponent not in (0, 10]; noise not in [0, 1];
// samples * ids_per_example > kMaxSyntheticValues (synthetic.h). RESOURCE_EXHAUSTED the
// data and the generator's table (8 bytes per id) do not fit the memory budget.
absl::StatusOr<Dataset> MakeZipfIdsDataset(const ZipfIdsOptions& options);

// The hidden class of id v (the first bullet above).
int64_t ZipfIdClass(uint64_t seed, int64_t classes, int64_t id);

// The share of `data`'s examples (made with `options`) whose label is the class most of
// their ids have: the accuracy of a model that knows every id's class.
double ZipfOracleAccuracy(const Dataset& data, const ZipfIdsOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_ZIPF_IDS_H_
