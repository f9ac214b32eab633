#include "common/data/zipf_ids.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/data/data_spec.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

ZipfIdsOptions Small() {
  ZipfIdsOptions o;
  o.samples = 20000;
  o.ids_per_example = 8;
  o.vocabulary = 1000;
  o.classes = 10;
  o.seed = 3;
  return o;
}

TEST(ZipfIdsTest, SeededShapedAndInRange) {
  const ZipfIdsOptions o = Small();
  auto a = MakeZipfIdsDataset(o);
  auto b = MakeZipfIdsDataset(o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  EXPECT_EQ(a->x.shape(), (std::vector<int64_t>{20000, 8}));
  EXPECT_EQ(a->y.shape(), (std::vector<int64_t>{20000}));
  EXPECT_EQ(a->num_classes, 10);
  EXPECT_TRUE(a->Validate().ok());
  EXPECT_EQ(Values(a->x), Values(b->x));
  EXPECT_EQ(Values(a->y), Values(b->y));
  for (float id : a->x.values()) {
    ASSERT_TRUE(id >= 0 && id < 1000 && id == std::floor(id)) << id;
  }
  ZipfIdsOptions other = o;
  other.stream = 1;
  auto c = MakeZipfIdsDataset(other);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Values(a->x), Values(c->x));
}

TEST(ZipfIdsTest, PlainDrawsFollowTheZipfLaw) {
  ZipfIdsOptions o = Small();
  o.noise = 1.0;  // every id a plain Zipf draw
  auto data = MakeZipfIdsDataset(o);
  ASSERT_TRUE(data.ok());
  // Rank 0 is id 0, rank 1 id stride (618 is even: 619 and 1000 are coprime).
  double norm = 0;
  for (int r = 1; r <= 1000; ++r) norm += std::pow(r, -1.1);
  const double n = 20000.0 * 8;
  for (const auto& [id, rank] : std::vector<std::pair<int, int>>{{0, 0}, {619, 1}}) {
    int64_t count = 0;
    for (float v : data->x.values()) count += v == id;
    const double p = std::pow(rank + 1, -1.1) / norm;
    EXPECT_NEAR(count / n, p, 5 * std::sqrt(p * (1 - p) / n)) << "id " << id;
  }
  // Without signal, knowing every id's class is worth about chance.
  EXPECT_LT(ZipfOracleAccuracy(*data, o), 0.2);
}

TEST(ZipfIdsTest, TheIdsCarryTheLabel) {
  ZipfIdsOptions o = Small();
  o.noise = 0.0;
  auto clean = MakeZipfIdsDataset(o);
  ASSERT_TRUE(clean.ok());
  for (int64_t i = 0; i < 200; ++i) {
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(ZipfIdClass(o.seed, o.classes, static_cast<int64_t>(clean->x.data()[i * 8 + k])),
                static_cast<int64_t>(clean->y.data()[i]));
    }
  }
  EXPECT_EQ(ZipfOracleAccuracy(*clean, o), 1.0);
  o.noise = 0.3;
  auto noisy = MakeZipfIdsDataset(o);
  ASSERT_TRUE(noisy.ok());
  EXPECT_GT(ZipfOracleAccuracy(*noisy, o), 0.95);
}

// examples/zipf_embedding.json's validation set: the accuracy bound its README figure is
// measured against.
TEST(ZipfIdsTest, TheExamplesValidationSetIsAlmostAllSignal) {
  ZipfIdsOptions o;
  o.samples = 10000;
  o.ids_per_example = 8;
  o.vocabulary = 1000000;
  o.classes = 10;
  o.exponent = 1.1;
  o.noise = 0.3;
  o.seed = 7;
  o.stream = 1;
  auto data = MakeZipfIdsDataset(o);
  ASSERT_TRUE(data.ok()) << data.status();
  const double oracle = ZipfOracleAccuracy(*data, o);
  std::printf("oracle accuracy of the example's validation set: %.4f\n", oracle);
  EXPECT_GT(oracle, 0.98);
}

TEST(ZipfIdsTest, BadOptionsAreRefused) {
  const ZipfIdsOptions good = Small();
  std::vector<ZipfIdsOptions> bad(7, good);
  bad[0].samples = 0;
  bad[1].ids_per_example = 0;
  bad[2].classes = 1;
  bad[3].vocabulary = (int64_t{1} << 24) + 1;
  bad[4].exponent = 0;
  bad[5].noise = 1.5;
  bad[6].samples = int64_t{1} << 40;
  for (const ZipfIdsOptions& o : bad) {
    EXPECT_EQ(MakeZipfIdsDataset(o).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ZipfIdsTest, LoadedFromAJobSpec) {
  auto data = LoadDataset(nlohmann::json::parse(R"({"type": "zipf_ids", "samples": 100,
      "ids_per_example": 4, "vocabulary": 5000, "classes": 5, "exponent": 1.2, "noise": 0.1,
      "seed": 9, "stream": 2})"),
                          "");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->x.shape(), (std::vector<int64_t>{100, 4}));
  EXPECT_EQ(LoadDataset(nlohmann::json::parse(R"({"type": "zipf_ids", "vocab": 5})"), "")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
