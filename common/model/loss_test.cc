#include "common/model/loss.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

TEST(LossTest, ReadsStringsAndDicts) {
  auto a = LossConfigFromKeras(json("sparse_categorical_crossentropy"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, LossConfig::Kind::kSparseCategoricalCrossentropy);
  EXPECT_FALSE(a->from_logits);
  auto b = LossConfigFromKeras(json::parse(
      R"({"module":"keras.losses","class_name":"CategoricalCrossentropy","config":{"name":"categorical_crossentropy","reduction":"sum_over_batch_size","from_logits":true,"label_smoothing":0.0,"axis":-1},"registered_name":null})"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->kind, LossConfig::Kind::kCategoricalCrossentropy);
  EXPECT_TRUE(b->from_logits);
  EXPECT_EQ(LossConfigFromKeras(json("mse"))->kind, LossConfig::Kind::kMeanSquaredError);
  EXPECT_EQ(LossConfigFromKeras(json("BinaryCrossentropy"))->kind,
            LossConfig::Kind::kBinaryCrossentropy);
}

TEST(LossTest, RejectsUnknownAndMathChangingFields) {
  auto a = LossConfigFromKeras(json("hinge"));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("hinge"), std::string::npos);
  auto b = LossConfigFromKeras(json::parse(
      R"({"class_name":"CategoricalCrossentropy","config":{"label_smoothing":0.1}})"));
  EXPECT_NE(b.status().message().find("label_smoothing"), std::string::npos);
  auto c = LossConfigFromKeras(json::parse(
      R"({"class_name":"CategoricalCrossentropy","config":{"from_logits":"yes"}})"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LossTest, RoundTrips) {
  for (auto kind : {LossConfig::Kind::kSparseCategoricalCrossentropy,
                    LossConfig::Kind::kCategoricalCrossentropy,
                    LossConfig::Kind::kMeanSquaredError, LossConfig::Kind::kBinaryCrossentropy}) {
    for (bool logits : {false, true}) {
      LossConfig c{kind, kind == LossConfig::Kind::kMeanSquaredError ? false : logits};
      auto back = LossConfigFromKeras(LossConfigToKeras(c));
      ASSERT_TRUE(back.ok());
      EXPECT_TRUE(*back == c) << LossName(kind);
    }
  }
}

}  // namespace
}  // namespace pstrain
