#include "common/model/row_initializer.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/model/layers/initializer.h"
#include "common/model/model.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

std::vector<float> Draw(const RowInitializer& init, int64_t begin, int64_t end) {
  absl::StatusOr<Tensor> t = DrawShard({"v", init, begin, end});
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  return std::vector<float>(t->values().begin(), t->values().end());
}

RowInitializer Init(InitialDistribution d, double a, double b, std::vector<int64_t> shape,
                    uint64_t seed = 7) {
  RowInitializer init;
  init.distribution = d;
  init.a = a;
  init.b = b;
  init.shape = std::move(shape);
  init.seed = seed;
  return init;
}

const InitialDistribution kAll[] = {InitialDistribution::kConstant, InitialDistribution::kNormal,
                                    InitialDistribution::kTruncatedNormal,
                                    InitialDistribution::kUniform};

// Rows cut at any points, drawn piece by piece and put back in order, are the whole
// variable bit for bit: what 2 ps and 3 ps hold of it is the same.
TEST(RowInitializerTest, TheValuesDoNotDependOnHowTheRowsAreSplit) {
  for (InitialDistribution d : kAll) {
    const RowInitializer init = Init(d, -0.25, 0.5, {37, 3, 5});
    const std::vector<float> whole = Draw(init, 0, 37);
    ASSERT_EQ(whole.size(), 37u * 15);
    for (const std::vector<int64_t>& cuts :
         std::vector<std::vector<int64_t>>{{0, 19, 37}, {0, 13, 26, 37}, {0, 1, 2, 36, 37}}) {
      std::vector<float> joined;
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        const std::vector<float> part = Draw(init, cuts[i], cuts[i + 1]);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      // Bit for bit (== on floats also holds for these finite values).
      EXPECT_TRUE(joined == whole) << static_cast<int>(d);
    }
  }
}

TEST(RowInitializerTest, RowsAndVariablesDrawFromStreamsOfTheirOwn) {
  const RowInitializer init = Init(InitialDistribution::kNormal, 0, 1, {4, 8});
  const std::vector<float> v = Draw(init, 0, 4);
  for (int r = 1; r < 4; ++r) {
    EXPECT_NE(std::vector<float>(v.begin(), v.begin() + 8),
              std::vector<float>(v.begin() + 8 * r, v.begin() + 8 * (r + 1)));
  }
  RowInitializer other = init;
  other.seed = VariableSeed(1, "dense_1/kernel");
  EXPECT_NE(Draw(other, 0, 4), v);
  EXPECT_NE(VariableSeed(1, "dense/kernel"), VariableSeed(1, "dense/bias"));
  EXPECT_NE(VariableSeed(1, "dense/kernel"), VariableSeed(2, "dense/kernel"));
  // A rank-0 variable is one row; a rank-1 one a row per element.
  EXPECT_EQ(Draw(Init(InitialDistribution::kUniform, 0, 1, {}), 0, 1).size(), 1u);
  const RowInitializer vector = Init(InitialDistribution::kUniform, 0, 1, {6});
  const std::vector<float> all = Draw(vector, 0, 6);
  EXPECT_EQ(std::vector<float>(all.begin() + 2, all.begin() + 5), Draw(vector, 2, 5));
}

struct Moments {
  double mean = 0, stddev = 0, lo = 0, hi = 0;
};
Moments Of(const std::vector<float>& v) {
  Moments m;
  m.lo = m.hi = v[0];
  double sum = 0, sum_sq = 0;
  for (float x : v) {
    sum += x;
    sum_sq += static_cast<double>(x) * x;
    m.lo = std::min<double>(m.lo, x);
    m.hi = std::max<double>(m.hi, x);
  }
  m.mean = sum / v.size();
  m.stddev = std::sqrt(sum_sq / v.size() - m.mean * m.mean);
  return m;
}

// 200,000 draws: the mean within a few standard errors, the spread within 2%.
TEST(RowInitializerTest, DrawsFollowTheirDistributions) {
  const std::vector<int64_t> shape = {2000, 100};
  const Moments normal = Of(Draw(Init(InitialDistribution::kNormal, 1.5, 2.0, shape), 0, 2000));
  EXPECT_NEAR(normal.mean, 1.5, 0.03);
  EXPECT_NEAR(normal.stddev, 2.0, 0.04);
  EXPECT_LT(normal.lo, 1.5 - 3 * 2.0);  // tails exist
  const Moments truncated =
      Of(Draw(Init(InitialDistribution::kTruncatedNormal, 0.0, 1.0, shape), 0, 2000));
  EXPECT_NEAR(truncated.mean, 0.0, 0.02);
  EXPECT_NEAR(truncated.stddev, 0.87962566103423978, 0.02);
  EXPECT_GE(truncated.lo, -2.0);
  EXPECT_LE(truncated.hi, 2.0);
  const Moments uniform = Of(Draw(Init(InitialDistribution::kUniform, -3.0, 1.0, shape), 0, 2000));
  EXPECT_NEAR(uniform.mean, -1.0, 0.02);
  EXPECT_NEAR(uniform.stddev, 4.0 / std::sqrt(12.0), 0.02);
  EXPECT_GE(uniform.lo, -3.0);
  EXPECT_LE(uniform.hi, 1.0);
  for (float x : Draw(Init(InitialDistribution::kConstant, 0.75, 0, {3, 4}), 0, 3)) {
    EXPECT_EQ(x, 0.75f);
  }
}

// Keras's initializers resolve to the distribution Keras draws from, for the shape.
TEST(RowInitializerTest, KerasInitializersResolveForTheVariablesShape) {
  auto resolve = [](const char* name, std::vector<int64_t> shape) {
    absl::StatusOr<Initializer> init = Initializer::FromKeras(nlohmann::json(name));
    EXPECT_TRUE(init.ok()) << name << ": " << init.status();
    return init->ForVariable(shape, 42);
  };
  RowInitializer glorot = resolve("glorot_uniform", {784, 64});
  EXPECT_EQ(glorot.distribution, InitialDistribution::kUniform);
  EXPECT_DOUBLE_EQ(glorot.b, std::sqrt(6.0 / (784 + 64)));
  EXPECT_DOUBLE_EQ(glorot.a, -glorot.b);
  EXPECT_EQ(glorot.seed, 42u);
  RowInitializer he = resolve("he_normal", {3, 3, 8, 16});  // fan_in 3*3*8
  EXPECT_EQ(he.distribution, InitialDistribution::kTruncatedNormal);
  EXPECT_DOUBLE_EQ(he.b, std::sqrt(2.0 / 72) / 0.87962566103423978);
  RowInitializer he_uniform = resolve("he_uniform", {10, 20});
  EXPECT_DOUBLE_EQ(he_uniform.b, std::sqrt(3.0 * 2.0 / 10));
  RowInitializer glorot_normal = resolve("glorot_normal", {10, 30});
  EXPECT_DOUBLE_EQ(glorot_normal.b, std::sqrt(1.0 / 20) / 0.87962566103423978);
  EXPECT_EQ(resolve("ones", {5}).a, 1.0);
  EXPECT_EQ(resolve("zeros", {5}).distribution, InitialDistribution::kConstant);
  // An initializer's own seed wins over the variable's.
  absl::StatusOr<Initializer> seeded = Initializer::FromKeras(
      {{"class_name", "RandomNormal"}, {"config", {{"stddev", 0.1}, {"seed", 9}}}});
  ASSERT_TRUE(seeded.ok()) << seeded.status();
  EXPECT_EQ(seeded->ForVariable({4}, 42).seed, 9u);
  // One whose draws would not be finite floats is refused where the model is read.
  EXPECT_FALSE(Initializer::FromKeras(
                   {{"class_name", "RandomNormal"}, {"config", {{"stddev", 1e300}}}})
                   .ok());
  EXPECT_FALSE(
      Initializer::FromKeras({{"class_name", "Constant"}, {"config", {{"value", 1e39}}}}).ok());
}

// The model draws each variable as its InitialValuesOf says, so what a ps draws for its
// rows is the one-process trainer's values.
TEST(RowInitializerTest, TheModelsInitialValuesAreItsRowInitializers) {
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJsonText(
      R"({"class_name":"Sequential","config":{"layers":[
          {"class_name":"InputLayer","config":{"batch_input_shape":[null,12]}},
          {"class_name":"Dense","config":{"name":"dense","units":7,"activation":"relu"}},
          {"class_name":"Dense","config":{"name":"out","units":3,
                                          "kernel_initializer":"he_normal"}}]}})",
      nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Tensor> values = (*model)->InitialValues(3);
  ASSERT_EQ(values.size(), 4u);
  for (size_t v = 0; v < values.size(); ++v) {
    const RowInitializer init = (*model)->InitialValuesOf(v, 3);
    EXPECT_EQ(init.shape, values[v].shape());
    EXPECT_EQ(init.seed, VariableSeed(3, (*model)->variables()[v].name));
    absl::StatusOr<Tensor> drawn = DrawShard({"x", init, 0, init.shape[0]});
    ASSERT_TRUE(drawn.ok()) << drawn.status();
    EXPECT_TRUE(drawn->values() == values[v].values()) << v;
  }
}

// What a hostile CreateVariables could carry is refused before anything is allocated.
TEST(RowInitializerTest, ValidationRefusesWhatCannotBeDrawn) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    RowInitializer init;
    int64_t begin, end;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {Init(InitialDistribution::kUniform, 0, 1, std::vector<int64_t>(9, 1)), 0, 1, "rank 9"},
      {Init(InitialDistribution::kUniform, 0, 1, {4, 0}), 0, 1, "below 1"},
      {Init(InitialDistribution::kUniform, 0, 1, {-4, 2}), 0, 1, "below 1"},
      {Init(InitialDistribution::kUniform, 0, 1, {INT64_MAX / 2, 4}), 0, 1, "too many"},
      {Init(InitialDistribution::kUniform, 0, 1, {1 << 21, 1 << 21, 1 << 21}), 0, 1, "too many"},
      {Init(InitialDistribution::kUniform, 0, 1, {4, 2}), 3, 3, "rows [3, 3)"},
      {Init(InitialDistribution::kUniform, 0, 1, {4, 2}), -1, 2, "rows [-1, 2)"},
      {Init(InitialDistribution::kUniform, 0, 1, {4, 2}), 2, 5, "rows [2, 5)"},
      {Init(InitialDistribution::kUniform, 0, 1, {}), 0, 2, "1 rows"},
      {Init(InitialDistribution::kNormal, nan, 1, {4}), 0, 4, "finite"},
      {Init(InitialDistribution::kNormal, 0, inf, {4}), 0, 4, "finite"},
      {Init(InitialDistribution::kNormal, 0, -1, {4}), 0, 4, "stddev"},
      {Init(InitialDistribution::kTruncatedNormal, 0, 1e38, {4}), 0, 4, "stddev"},
      {Init(InitialDistribution::kUniform, 1, 0, {4}), 0, 4, "minval"},
      {Init(InitialDistribution::kUniform, -1e39, 0, {4}), 0, 4, "minval"},
      {Init(InitialDistribution::kConstant, 1e39, 0, {4}), 0, 4, "not a finite float"},
      {Init(static_cast<InitialDistribution>(17), 0, 1, {4}), 0, 4, "unknown"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ValidateRowRange(c.init, c.begin, c.end);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.expected << ": " << s;
    EXPECT_NE(s.message().find(c.expected), absl::string_view::npos)
        << "want \"" << c.expected << "\" in: " << s.message();
    EXPECT_FALSE(DrawShard({"v", c.init, c.begin, c.end}).ok());
  }
  // The widest that is allowed draws finite floats.
  const std::vector<float> wide =
      Draw(Init(InitialDistribution::kNormal, 0, FLT_MAX / 10, {1000}), 0, 1000);
  for (float x : wide) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace pstrain
