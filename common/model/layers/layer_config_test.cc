// Keras config reading through the registry: unknown keys, unsupported keys at and off
// their defaults, Keras 2 and Keras 3 spellings.

#include "common/model/layers/layer_config.h"

#include <string>

#include "common/model/layers/registry.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

absl::StatusOr<std::unique_ptr<Layer>> Create(const std::string& class_name,
                                              const std::string& config_text) {
  const json config = json::parse(config_text);
  LayerConfig reader(&config, "layer 1 'x' (" + class_name + ")");
  return LayerRegistry::Default().Create(class_name, reader);
}

void ExpectInvalid(const absl::Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s;
}

TEST(LayerConfigTest, UnknownKeyNamesLayerAndKey) {
  // The issue's example: a misspelled activation must not train as a linear layer.
  auto layer = Create("Dense", R"({"name": "dense", "units": 4, "activaton": "relu"})");
  ExpectInvalid(layer.status(), "layer 1 'x' (Dense): unknown config key \"activaton\"");
  ExpectInvalid(Create("Dropout", R"({"rate": 0.1, "rat": 0.2})").status(), "\"rat\"");
  ExpectInvalid(Create("Flatten", R"({"units": 3})").status(), "\"units\"");
  // A key another layer has is still unknown here.
  ExpectInvalid(Create("Activation", R"({"activation": "relu", "use_bias": true})").status(),
                "\"use_bias\"");
}

TEST(LayerConfigTest, UnsupportedKeysOnlyAtTheirDefault) {
  EXPECT_TRUE(Create("Dense", R"({"units": 4, "kernel_regularizer": null, "lora_rank": null,
                                  "bias_constraint": null, "trainable": true})")
                  .ok());
  ExpectInvalid(Create("Dense", R"({"units": 4, "lora_rank": 4})").status(),
                "lora_rank is unsupported (got 4)");
  ExpectInvalid(Create("Dense", R"({"units": 4, "trainable": false})").status(),
                "trainable=false");
  ExpectInvalid(Create("Dropout", R"({"rate": 0.5, "noise_shape": [null, 1]})").status(),
                "noise_shape");
  ExpectInvalid(Create("Flatten", R"({"data_format": "channels_first"})").status(),
                "channels_first");
  ExpectInvalid(Create("Dense", R"({"units": 4, "dtype": "float16"})").status(), "dtype");
  ExpectInvalid(Create("Dense", R"({"units": 4, "dtype": {"class_name": "Policy",
                                   "config": {"name": "mixed_float16"}}})")
                    .status(),
                "mixed_float16");
}

TEST(LayerConfigTest, Keras2AndKeras3Spellings) {
  // Keras 3: DTypePolicy dicts, module/registered_name on initializers.
  auto k3 = Create("Dense", R"({"name": "d", "trainable": true,
      "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
                "registered_name": null},
      "units": 3, "activation": "relu", "use_bias": true,
      "kernel_initializer": {"module": "keras.initializers", "class_name": "HeNormal",
                             "config": {"seed": 3}, "registered_name": null},
      "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
                           "registered_name": null},
      "kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
      "bias_constraint": null, "quantization_config": null})");
  ASSERT_TRUE(k3.ok()) << k3.status();
  EXPECT_EQ((*k3)->name(), "d");
  EXPECT_EQ((*k3)->output_activation(), Activation::kRelu);
  // Keras 2: a Policy dict, batch_input_shape on the first layer, string initializers.
  auto k2 = Create("Dense", R"({"name": "d", "trainable": true, "batch_input_shape": [null, 5],
      "dtype": {"class_name": "Policy", "config": {"name": "float32"}}, "units": 3,
      "kernel_initializer": "glorot_uniform", "bias_initializer": "zeros",
      "activity_regularizer": null})");
  ASSERT_TRUE(k2.ok()) << k2.status();
  EXPECT_EQ((*k2)->declared_input_shape(), (Shape{5}));
  auto dim = Create("Dense", R"({"units": 3, "input_dim": 7})");
  ASSERT_TRUE(dim.ok());
  EXPECT_EQ((*dim)->declared_input_shape(), (Shape{7}));
  // A nested initializer config is checked too.
  ExpectInvalid(Create("Dense", R"({"units": 3, "kernel_initializer": {"class_name":
                                   "RandomNormal", "config": {"stdev": 1}}})")
                    .status(),
                "kernel_initializer: \"stdev\" is not a config key of RandomNormal");
  ExpectInvalid(Create("Dense", R"({"units": 3, "kernel_initializer": "orthogonal"})").status(),
                "orthogonal");
}

TEST(LayerConfigTest, InputLayerForms) {
  for (const char* config : {R"({"batch_shape": [null, 28, 28, 1], "dtype": "float32",
                                  "sparse": false, "ragged": false, "name": "in"})",
                             R"({"batch_input_shape": [null, 28, 28, 1], "dtype": "float32",
                                  "sparse": false, "ragged": false, "name": "in"})",
                             R"({"shape": [28, 28, 1], "name": "in", "optional": false})",
                             R"({"input_shape": [28, 28, 1]})"}) {
    auto layer = Create("InputLayer", config);
    ASSERT_TRUE(layer.ok()) << layer.status() << config;
    EXPECT_TRUE((*layer)->IsInput());
    EXPECT_EQ((*layer)->declared_input_shape(), (Shape{28, 28, 1})) << config;
  }
  ExpectInvalid(Create("InputLayer", R"({"batch_shape": [null, 4], "sparse": true})").status(),
                "sparse");
  ExpectInvalid(Create("InputLayer", R"({"batch_shape": [null, 4], "trainable": true})").status(),
                "\"trainable\"");
  ExpectInvalid(Create("InputLayer", R"({"batch_shape": [null, null]})").status(),
                "unknown or invalid dimension");
}

TEST(LayerConfigTest, UnknownClassListsTheRegisteredOnes) {
  auto layer = Create("LSTM", R"({"units": 3})");
  ExpectInvalid(layer.status(), "unsupported layer \"LSTM\"");
  ExpectInvalid(layer.status(), "Dense");
}

}  // namespace
}  // namespace pstrain
