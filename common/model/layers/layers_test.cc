// Every layer through the Model on the CPU backend: gradients against central finite
// differences of the mean training loss, forward values against direct computations,
// BatchNormalization's statistics, Embedding's ids, and Keras JSON read and written back.

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/math/cpu_backend.h"
#include "common/model/model.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

// A Sequential model of `layers` (JSON objects) on an input of `shape`.
std::string Seq(const std::vector<int64_t>& shape, const std::vector<std::string>& layers) {
  std::string s = absl::StrCat(
      R"({"class_name":"Sequential","config":{"name":"m","layers":[{"class_name":"InputLayer","config":{"batch_shape":[null,)",
      absl::StrJoin(shape, ","), "]}}");
  for (const auto& l : layers) s += "," + l;
  return s + "]}}";
}

std::string L(const std::string& class_name, const std::string& config = "") {
  return absl::StrCat(R"({"class_name":")", class_name, R"(","config":{)", config, "}}");
}

Tensor RandomTensor(std::vector<int64_t> shape, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t(std::move(shape));
  for (float& v : t.values()) v = d(rng);
  return t;
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.values().begin(), t.values().end());
}

class LayersTest : public ::testing::Test {
 protected:
  std::unique_ptr<Model> Build(const std::string& text) {
    auto m = Model::FromKerasJsonText(text, backend_.get());
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }

  // Checks TrainStep's gradient of every trainable variable against central differences
  // of the mean training loss (MSE against random targets, dropout masks fixed by the
  // seed, so the loss is a fixed function of the weights).
  void GradCheck(const std::string& text, const Tensor& x, uint32_t seed) {
    std::unique_ptr<Model> m = Build(text);
    ASSERT_NE(m, nullptr);
    ASSERT_TRUE(m->SetLoss({LossConfig::Kind::kMeanSquaredError, false}).ok());
    const int64_t batch = x.shape()[0];
    const Tensor y = RandomTensor({batch, m->output_size()}, seed + 100);
    std::vector<Tensor> w = m->InitialValues(seed);
    // Non-trivial biases, betas and gammas so every path is exercised.
    for (size_t i = 0; i < w.size(); ++i) {
      const VariableSpec& v = m->variables()[i];
      if (v.trainable && v.shape.size() == 1) {
        w[i] = RandomTensor(v.shape, seed + i, 0.5f, 1.5f);
      }
    }
    std::vector<Tensor> grads;
    auto r = m->TrainStep(w, x, y, 99, &grads);
    ASSERT_TRUE(r.ok()) << r.status();
    auto loss_at = [&](std::vector<Tensor>& ww) {
      std::vector<Tensor> tmp;
      auto s = m->TrainStep(ww, x, y, 99, &tmp);
      EXPECT_TRUE(s.ok()) << s.status();
      return s->loss_sum / static_cast<double>(batch);
    };
    const float eps = 1e-3f;
    int checked = 0;
    for (size_t v = 0; v < w.size(); ++v) {
      if (!m->variables()[v].trainable) continue;
      for (int64_t i = 0; i < w[v].num_elements(); ++i) {
        const float orig = w[v].data()[i];
        w[v].data()[i] = orig + eps;
        const double up = loss_at(w);
        w[v].data()[i] = orig - eps;
        const double down = loss_at(w);
        w[v].data()[i] = orig;
        const double numeric = (up - down) / (2 * eps);
        EXPECT_NEAR(grads[v].data()[i], numeric, 2e-2 * std::max(std::fabs(numeric), 0.05))
            << m->variables()[v].name << "[" << i << "]";
        ++checked;
      }
    }
    EXPECT_GT(checked, 0);
  }

  std::unique_ptr<Backend> backend_ = CreateCpuBackend();
};

TEST_F(LayersTest, Conv2DGradients) {
  struct Case {
    std::string conv;
    std::vector<int64_t> input;
  };
  const std::vector<Case> cases = {
      {R"("filters":3,"kernel_size":3,"activation":"tanh")", {5, 6, 2}},
      {R"("filters":2,"kernel_size":[2,3],"strides":2,"padding":"same")", {5, 7, 2}},
      {R"("filters":2,"kernel_size":3,"strides":[2,1],"padding":"same","activation":"relu")",
       {6, 5, 3}},
      {R"("filters":4,"kernel_size":1,"use_bias":false)", {3, 3, 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.conv);
    // A Dense before the convolution checks its input gradient too.
    const int64_t n = c.input[0] * c.input[1] * c.input[2];
    GradCheck(Seq({n}, {L("Dense", R"("units":)" + std::to_string(n)),
                        L("Reshape", absl::StrCat(R"("target_shape":[)",
                                                  absl::StrJoin(c.input, ","), "]")),
                        L("Conv2D", c.conv), L("Flatten"), L("Dense", R"("units":3)")}),
              RandomTensor({3, n}, 1), 2);
  }
}

TEST_F(LayersTest, PoolingGradients) {
  for (const std::string pool :
       {L("MaxPooling2D"), L("MaxPooling2D", R"("pool_size":3,"strides":2,"padding":"same")"),
        L("AveragePooling2D", R"("pool_size":2)"),
        L("AveragePooling2D", R"("pool_size":[3,2],"strides":[2,1],"padding":"same")"),
        L("GlobalAveragePooling2D"), L("GlobalAveragePooling2D", R"("keepdims":true)")}) {
    SCOPED_TRACE(pool);
    GradCheck(Seq({6, 5, 2}, {L("Conv2D", R"("filters":3,"kernel_size":2,"padding":"same")"),
                              pool, L("Flatten"), L("Dense", R"("units":2)")}),
              RandomTensor({2, 60}, 3), 4);
  }
  // GlobalAveragePooling1D over a sequence: Dense works per step, as in Keras.
  GradCheck(Seq({5, 3}, {L("Dense", R"("units":4,"activation":"tanh")"),
                         L("GlobalAveragePooling1D"), L("Dense", R"("units":2)")}),
            RandomTensor({3, 5, 3}, 5), 6);
}

TEST_F(LayersTest, ActivationSoftmaxReshapeDropoutGradients) {
  GradCheck(Seq({6}, {L("Dense", R"("units":12)"), L("Reshape", R"("target_shape":[3,-1])"),
                      L("Activation", R"("activation":"sigmoid")"),
                      L("Dense", R"("units":3)"), L("Softmax"), L("Dropout", R"("rate":0.3)"),
                      L("Flatten"), L("Dense", R"("units":2)")}),
            RandomTensor({4, 6}, 7), 8);
}

TEST_F(LayersTest, BatchNormalizationGradients) {
  // Over features, over the channels of an image, and without gamma or beta.
  GradCheck(Seq({4}, {L("Dense", R"("units":5)"), L("BatchNormalization"),
                      L("Activation", R"("activation":"relu")"), L("Dense", R"("units":3)")}),
            RandomTensor({6, 4}, 9), 10);
  GradCheck(Seq({4, 4, 2}, {L("Conv2D", R"("filters":3,"kernel_size":2)"),
                            L("BatchNormalization", R"("momentum":0.9,"epsilon":0.01)"),
                            L("Flatten"), L("Dense", R"("units":2)")}),
            RandomTensor({3, 4, 4, 2}, 11), 12);
  GradCheck(Seq({3}, {L("Dense", R"("units":4)"),
                      L("BatchNormalization", R"("center":false,"scale":false)"),
                      L("Dense", R"("units":2,"activation":"tanh")")}),
            RandomTensor({5, 3}, 13), 14);
}

TEST_F(LayersTest, EmbeddingGradients) {
  Tensor ids({4, 3}, {0, 3, 3, 9, 1, 0, 2, 2, 2, 5, 9, 7});  // repeated ids sum
  GradCheck(Seq({3}, {L("Embedding", R"("input_dim":10,"output_dim":4)"),
                      L("GlobalAveragePooling1D"), L("Dense", R"("units":2)")}),
            ids, 15);
  GradCheck(Seq({3}, {L("Embedding", R"("input_dim":10,"output_dim":2)"), L("Flatten"),
                      L("Dense", R"("units":3,"activation":"relu")")}),
            ids, 16);
}

TEST_F(LayersTest, EmbeddingChecksIdsAndPlace) {
  std::unique_ptr<Model> m = Build(Seq({2}, {L("Embedding", R"("input_dim":5,"output_dim":2)"),
                                             L("Flatten"), L("Dense", R"("units":1)")}));
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->SetLoss({LossConfig::Kind::kMeanSquaredError, false}).ok());
  const auto w = m->InitialValues(1);
  for (const Tensor& bad : {Tensor({1, 2}, {0, 5}), Tensor({1, 2}, {-1, 0}),
                            Tensor({1, 2}, {1.5f, 0})}) {
    auto r = m->Evaluate(w, bad, Tensor({1, 1}));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("not an integer in [0, 5)"), std::string::npos)
        << r.status();
  }
  // The looked-up rows are the table's.
  auto out = Build(Seq({2}, {L("Embedding", R"("input_dim":5,"output_dim":2)")}))
                 ->Predict({w[0]}, Tensor({1, 2}, {4, 1}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values(*out), (std::vector<float>{w[0].data()[8], w[0].data()[9], w[0].data()[2],
                                              w[0].data()[3]}));
  auto late = Model::FromKerasJsonText(
      Seq({2}, {L("Dense", R"("units":2)"), L("Embedding", R"("input_dim":5,"output_dim":2)")}),
      backend_.get());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(late.status().message().find("must be the first layer"), std::string::npos)
      << late.status();
}

// A batch whose im2col columns exceed Conv2D's chunk (16 MiB) runs in chunks: the outputs
// and the gradient of the mean loss equal those of the same samples in smaller batches.
TEST_F(LayersTest, Conv2DInChunksMatchesWholeBatches) {
  // 64x64x8 with a 3x3 kernel: 295k column floats per sample, 14 samples per chunk.
  const std::string text =
      Seq({64, 64, 8}, {L("Conv2D", R"("filters":4,"kernel_size":3,"padding":"same")"),
                        L("GlobalAveragePooling2D"), L("Dense", R"("units":2)")});
  std::unique_ptr<Model> whole = Build(text);
  std::unique_ptr<Model> halves = Build(text);
  ASSERT_TRUE(whole && halves);
  for (Model* m : {whole.get(), halves.get()}) {
    ASSERT_TRUE(m->SetLoss({LossConfig::Kind::kMeanSquaredError, false}).ok());
  }
  const auto w = whole->InitialValues(3);
  const int64_t n = 64 * 64 * 8;
  const Tensor x = RandomTensor({20, n}, 4), y = RandomTensor({20, 2}, 5);
  auto rows = [](const Tensor& t, int64_t first, int64_t count) {
    const int64_t width = t.num_elements() / t.shape()[0];
    std::vector<int64_t> shape = t.shape();
    shape[0] = count;
    return Tensor(shape, std::vector<float>(t.data() + first * width,
                                            t.data() + (first + count) * width));
  };
  std::vector<Tensor> g, ga, gb;
  ASSERT_TRUE(whole->TrainStep(w, x, y, 0, &g).ok());
  ASSERT_TRUE(halves->TrainStep(w, rows(x, 0, 10), rows(y, 0, 10), 0, &ga).ok());
  ASSERT_TRUE(halves->TrainStep(w, rows(x, 10, 10), rows(y, 10, 10), 0, &gb).ok());
  for (size_t v = 0; v < g.size(); ++v) {
    // The bias gradient sums 20 x 64 x 64 float terms that cancel, in a different order per
    // chunking, so the rounding error scales with the variable's largest gradient, not with
    // each element (a missing or doubled chunk would be off by tens of percent).
    float scale = 0;
    for (int64_t i = 0; i < g[v].num_elements(); ++i) {
      scale = std::max(scale, std::fabs(g[v].data()[i]));
    }
    for (int64_t i = 0; i < g[v].num_elements(); ++i) {
      const float want = 0.5f * (ga[v].data()[i] + gb[v].data()[i]);
      EXPECT_NEAR(g[v].data()[i], want, 1e-5f + 2e-3f * scale)
          << whole->variables()[v].name << "[" << i << "]";
    }
  }
  auto out = whole->Predict(w, x);
  auto first = halves->Predict(w, rows(x, 0, 10));
  ASSERT_TRUE(out.ok() && first.ok());
  for (int64_t i = 0; i < first->num_elements(); ++i) {
    EXPECT_NEAR(out->data()[i], first->data()[i], 1e-5f);
  }
}

TEST_F(LayersTest, Conv2DAndPoolingForwardValues) {
  // A 4x5x2 input, a 3x3 "same" convolution with stride 2, against a direct loop.
  std::unique_ptr<Model> m = Build(
      Seq({4, 5, 2}, {L("Conv2D", R"("filters":3,"kernel_size":3,"strides":2,"padding":"same")")}));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->output_shape(), (std::vector<int64_t>{2, 3, 3}));
  std::vector<Tensor> w = m->InitialValues(3);
  w[1] = RandomTensor({3}, 4);
  const Tensor x = RandomTensor({2, 4, 5, 2}, 5);
  auto out = m->Predict(w, x);
  ASSERT_TRUE(out.ok()) << out.status();
  // TensorFlow's "same": out = ceil(in / 2); padding max((out-1)*2+3-in, 0) = 1 (h), 2 (w),
  // split top/left = 0 and 1.
  const int pad_top = 0, pad_left = 1;
  for (int b = 0; b < 2; ++b) {
    for (int oh = 0; oh < 2; ++oh) {
      for (int ow = 0; ow < 3; ++ow) {
        for (int f = 0; f < 3; ++f) {
          double want = w[1].data()[f];
          for (int kh = 0; kh < 3; ++kh) {
            for (int kw = 0; kw < 3; ++kw) {
              const int ih = oh * 2 + kh - pad_top, iw = ow * 2 + kw - pad_left;
              if (ih < 0 || ih >= 4 || iw < 0 || iw >= 5) continue;
              for (int c = 0; c < 2; ++c) {
                want += x.data()[((b * 4 + ih) * 5 + iw) * 2 + c] *
                        w[0].data()[((kh * 3 + kw) * 2 + c) * 3 + f];
              }
            }
          }
          EXPECT_NEAR(out->data()[((b * 2 + oh) * 3 + ow) * 3 + f], want, 1e-5);
        }
      }
    }
  }
  // Max and average pooling, 2x2 "same" on 3x3: the last row/column windows are partial
  // (averages count only the elements inside).
  const Tensor img({1, 3, 3, 1}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto max = Build(Seq({3, 3, 1}, {L("MaxPooling2D", R"("padding":"same")")}))->Predict({}, img);
  auto avg =
      Build(Seq({3, 3, 1}, {L("AveragePooling2D", R"("pool_size":2,"padding":"same")")}))
          ->Predict({}, img);
  ASSERT_TRUE(max.ok() && avg.ok());
  EXPECT_EQ(Values(*max), (std::vector<float>{5, 6, 8, 9}));
  EXPECT_EQ(Values(*avg), (std::vector<float>{3, 4.5f, 7.5f, 9}));
  auto gap = Build(Seq({3, 3, 1}, {L("GlobalAveragePooling2D")}))->Predict({}, img);
  ASSERT_TRUE(gap.ok());
  EXPECT_EQ(Values(*gap), (std::vector<float>{5}));
}

TEST_F(LayersTest, BatchNormalizationStatistics) {
  std::unique_ptr<Model> m =
      Build(Seq({3}, {L("BatchNormalization", R"("momentum":0.8,"epsilon":0.001)")}));
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->SetLoss({LossConfig::Kind::kMeanSquaredError, false}).ok());
  const auto& vars = m->variables();
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[0].name, "batch_normalization/gamma");
  EXPECT_EQ(vars[1].name, "batch_normalization/beta");
  EXPECT_EQ(vars[2].name, "batch_normalization/moving_mean");
  EXPECT_EQ(vars[3].name, "batch_normalization/moving_variance");
  EXPECT_TRUE(vars[1].trainable);
  EXPECT_FALSE(vars[2].trainable);
  EXPECT_FALSE(vars[3].trainable);
  EXPECT_FLOAT_EQ(vars[3].moving_average_momentum, 0.8f);
  EXPECT_EQ(m->trainable_variables().size(), 2u);
  std::vector<Tensor> w = m->InitialValues(1);
  EXPECT_EQ(Values(w[0]), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(Values(w[3]), (std::vector<float>{1, 1, 1}));
  // TrainStep's observations for the moving statistics are the batch's mean and biased
  // variance per feature.
  const Tensor x = RandomTensor({8, 3}, 17, -2, 3);
  std::vector<Tensor> g;
  ASSERT_TRUE(m->TrainStep(w, x, RandomTensor({8, 3}, 18), 0, &g).ok());
  for (int c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (int r = 0; r < 8; ++r) mean += x.data()[r * 3 + c] / 8.0;
    for (int r = 0; r < 8; ++r) var += std::pow(x.data()[r * 3 + c] - mean, 2) / 8.0;
    EXPECT_NEAR(g[2].data()[c], mean, 1e-5);
    EXPECT_NEAR(g[3].data()[c], var, 1e-5);
  }
  // At inference the moving statistics normalize.
  w[0] = Tensor({3}, {2, 1, 0.5f});
  w[1] = Tensor({3}, {0, 1, -1});
  w[2] = Tensor({3}, {1, -1, 0});
  w[3] = Tensor({3}, {4, 0.25f, 1});
  auto y = m->Predict(w, Tensor({1, 3}, {3, 0, 2}));
  ASSERT_TRUE(y.ok());
  EXPECT_NEAR(y->data()[0], 2 * (3 - 1) / std::sqrt(4.001), 1e-5);
  EXPECT_NEAR(y->data()[1], 1 * (0 + 1) / std::sqrt(0.251) + 1, 1e-5);
  EXPECT_NEAR(y->data()[2], 0.5 * 2 / std::sqrt(1.001) - 1, 1e-5);
}

// Every layer, read from Keras JSON, written back (Keras 3 form) and read again: the same
// variables and the same outputs.
TEST_F(LayersTest, EveryLayerRoundTripsThroughKerasJson) {
  const std::string text = Seq(
      {8, 8, 1},
      {L("Conv2D", R"("filters":4,"kernel_size":[3,3],"padding":"same","activation":"relu","kernel_initializer":{"class_name":"HeNormal","config":{"seed":1}})"),
       L("BatchNormalization", R"("momentum":0.9)"), L("MaxPooling2D", R"("pool_size":[2,2])"),
       L("AveragePooling2D", R"("pool_size":2,"strides":1,"padding":"same")"),
       L("Reshape", R"("target_shape":[16,4])"), L("Dense", R"("units":5)"),
       L("GlobalAveragePooling1D"), L("Dropout", R"("rate":0.25,"seed":3)"),
       L("Activation", R"("activation":"tanh")"), L("Dense", R"("units":3)"), L("Softmax")});
  std::unique_ptr<Model> m = Build(text);
  ASSERT_NE(m, nullptr);
  const json written = m->ToKerasJson();
  auto back = Model::FromKerasJson(written, backend_.get());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->ToKerasJson(), written);
  ASSERT_EQ((*back)->variables().size(), m->variables().size());
  for (size_t v = 0; v < m->variables().size(); ++v) {
    EXPECT_EQ((*back)->variables()[v].name, m->variables()[v].name);
    EXPECT_EQ((*back)->variables()[v].shape, m->variables()[v].shape);
    EXPECT_EQ((*back)->variables()[v].trainable, m->variables()[v].trainable);
  }
  const auto w = m->InitialValues(5);
  const Tensor x = RandomTensor({2, 64}, 6);
  auto a = m->Predict(w, x);
  auto b = (*back)->Predict(w, x);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Values(*a), Values(*b));
  // The Embedding's config too.
  std::unique_ptr<Model> e = Build(Seq({4}, {L("Embedding",
      R"("input_dim":7,"output_dim":3,"embeddings_initializer":{"class_name":"RandomNormal","config":{"stddev":0.1,"seed":2}})"),
      L("GlobalAveragePooling1D")}));
  ASSERT_NE(e, nullptr);
  auto e2 = Model::FromKerasJson(e->ToKerasJson(), backend_.get());
  ASSERT_TRUE(e2.ok()) << e2.status();
  EXPECT_EQ(Values(e->InitialValues(0)[0]), Values((*e2)->InitialValues(0)[0]));
}

// What tf.keras 2.15's to_json() writes for Sequential([Conv2D(8, 3, padding="same",
// use_bias=False, input_shape=(28, 28, 1)), BatchNormalization(), Activation("relu"),
// MaxPooling2D(), Flatten(), Dense(10, "softmax")]): BatchNormalization's axis is the
// built, positive list [3].
const char kKeras2Cnn[] = R"({"class_name": "Sequential", "config": {"name": "sequential", "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 28, 28, 1], "dtype": "float32", "sparse": false, "ragged": false, "name": "conv2d_input"}}, {"class_name": "Conv2D", "config": {"name": "conv2d", "trainable": true, "dtype": "float32", "batch_input_shape": [null, 28, 28, 1], "filters": 8, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1, "activation": "linear", "use_bias": false, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}, {"class_name": "BatchNormalization", "config": {"name": "batch_normalization", "trainable": true, "dtype": "float32", "axis": [3], "momentum": 0.99, "epsilon": 0.001, "center": true, "scale": true, "beta_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "gamma_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {}, "registered_name": null}, "moving_mean_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "moving_variance_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {}, "registered_name": null}, "beta_regularizer": null, "gamma_regularizer": null, "beta_constraint": null, "gamma_constraint": null}}, {"class_name": "Activation", "config": {"name": "activation", "trainable": true, "dtype": "float32", "activation": "relu"}}, {"class_name": "MaxPooling2D", "config": {"name": "max_pooling2d", "trainable": true, "dtype": "float32", "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_last"}}, {"class_name": "Flatten", "config": {"name": "flatten", "trainable": true, "dtype": "float32", "data_format": "channels_last"}}, {"class_name": "Dense", "config": {"name": "dense", "trainable": true, "dtype": "float32", "units": 10, "activation": "softmax", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}]}, "keras_version": "2.15.0", "backend": "tensorflow"})";

// What Keras 3 writes for Sequential([Input((10,)), Embedding(1000, 16),
// GlobalAveragePooling1D(), Dense(1, "sigmoid")]).
const char kKeras3Text[] = R"({"module": "keras", "class_name": "Sequential", "config": {"name": "sequential", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [null, 10], "dtype": "float32", "sparse": false, "ragged": false, "name": "input_layer"}, "registered_name": null}, {"module": "keras.layers", "class_name": "Embedding", "config": {"name": "embedding", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "input_dim": 1000, "output_dim": 16, "embeddings_initializer": {"module": "keras.initializers", "class_name": "RandomUniform", "config": {"seed": null, "minval": -0.05, "maxval": 0.05}, "registered_name": null}, "embeddings_regularizer": null, "activity_regularizer": null, "embeddings_constraint": null, "mask_zero": false, "quantization_config": null}, "registered_name": null, "build_config": {"input_shape": [null, 10]}}, {"module": "keras.layers", "class_name": "GlobalAveragePooling1D", "config": {"name": "global_average_pooling1d", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "keepdims": false}, "registered_name": null, "build_config": {"input_shape": [null, 10, 16]}}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "dense", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units": 1, "activation": "sigmoid", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 16]}}], "build_input_shape": [null, 10]}, "registered_name": null, "build_config": {"input_shape": [null, 10]}})";

TEST_F(LayersTest, ReadsKeras2And3ToJson) {
  std::unique_ptr<Model> cnn = Build(kKeras2Cnn);
  ASSERT_NE(cnn, nullptr);
  EXPECT_EQ(cnn->input_shape(), (std::vector<int64_t>{28, 28, 1}));
  std::vector<std::string> names;
  for (const VariableSpec& v : cnn->variables()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "conv2d/kernel", "batch_normalization/gamma", "batch_normalization/beta",
                       "batch_normalization/moving_mean", "batch_normalization/moving_variance",
                       "dense/kernel", "dense/bias"}));
  EXPECT_EQ(cnn->variables()[0].shape, (std::vector<int64_t>{3, 3, 1, 8}));
  EXPECT_EQ(cnn->variables()[5].shape, (std::vector<int64_t>{14 * 14 * 8, 10}));
  std::unique_ptr<Model> text = Build(kKeras3Text);
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(text->variables()[0].name, "embedding/embeddings");
  EXPECT_EQ(text->variables()[0].shape, (std::vector<int64_t>{1000, 16}));
  EXPECT_EQ(text->output_size(), 1);
  ASSERT_TRUE(text->SetLoss({LossConfig::Kind::kBinaryCrossentropy, false}).ok());
  EXPECT_EQ(text->accuracy_metric(), AccuracyMetric::kBinary);
}

TEST_F(LayersTest, RejectsWhatItCannotCompute) {
  auto expect = [&](const std::string& text, const std::string& needle) {
    auto m = Model::FromKerasJsonText(text, backend_.get());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status();
  };
  expect(Seq({5}, {L("Conv2D", R"("filters":2,"kernel_size":3)")}),
         "[height, width, channels]");
  expect(Seq({2, 2, 1}, {L("Conv2D", R"("filters":2,"kernel_size":3)")}), "does not fit");
  expect(Seq({4, 4, 1}, {L("Conv2D", R"("filters":2,"kernel_size":3,"dilation_rate":2)")}),
         "dilation_rate");
  expect(Seq({4, 4, 1}, {L("Conv2D", R"("filters":2,"kernel_size":3,"groups":2)")}), "groups");
  expect(Seq({4, 4, 1}, {L("Conv2D", R"("filters":2)")}), "kernel_size is required");
  expect(Seq({4, 4, 1}, {L("MaxPooling2D", R"("padding":"causal")")}), "causal");
  expect(Seq({4, 4, 1}, {L("Reshape", R"("target_shape":[5,-1])")}), "cannot reshape");
  expect(Seq({4, 2}, {L("BatchNormalization", R"("axis":1)")}), "only the last axis");
  expect(Seq({4}, {L("BatchNormalization", R"("synchronized":true)")}), "synchronized");
  expect(Seq({4}, {L("BatchNormalization", R"("renorm":true)")}), "renorm");
  expect(Seq({4, 3}, {L("Softmax", R"("axis":1)")}), "only the last axis");
  expect(Seq({4}, {L("Embedding", R"("input_dim":5,"output_dim":2,"mask_zero":true)")}),
         "mask_zero");
  expect(Seq({4}, {L("GlobalAveragePooling2D")}), "rank 3");
}

}  // namespace
}  // namespace pstrain
