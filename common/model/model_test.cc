#include "common/model/model.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/math/cpu_backend.h"
#include "common/model/layers/dense.h"
#include "common/model/layers/input_layer.h"
#include "common/model/optimizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

// What tf.keras 2.x writes for Sequential([Dense(64, relu, input_shape=(784,)),
// Dropout(0.2), Dense(10, softmax)]).to_json().
const char kKeras2[] = R"({"class_name": "Sequential", "config": {"name": "sequential", "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 784], "dtype": "float32", "sparse": false, "ragged": false, "name": "dense_input"}}, {"class_name": "Dense", "config": {"name": "dense", "trainable": true, "batch_input_shape": [null, 784], "dtype": "float32", "units": 64, "activation": "relu", "use_bias": true, "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}}, "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}, {"class_name": "Dropout", "config": {"name": "dropout", "trainable": true, "dtype": "float32", "rate": 0.2, "noise_shape": null, "seed": null}}, {"class_name": "Dense", "config": {"name": "dense_1", "trainable": true, "dtype": "float32", "units": 10, "activation": "softmax", "use_bias": true, "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}}, "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null}}]}, "keras_version": "2.13.1", "backend": "tensorflow"})";

// What Keras 3 writes for Sequential([Input((28, 28)), Flatten(), Dense(32, tanh), Dense(10)]).
const char kKeras3[] = R"({"module": "keras", "class_name": "Sequential", "config": {"name": "sequential", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28], "dtype": "float32", "sparse": false, "name": "input_layer"}, "registered_name": null}, {"module": "keras.layers", "class_name": "Flatten", "config": {"name": "flatten", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last"}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28]}}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "hidden", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units": 32, "activation": "tanh", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name": "HeNormal", "config": {"seed": 7}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 784]}}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "logits", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units": 10, "activation": "linear", "use_bias": false, "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotNormal", "config": {"seed": null}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 32]}}], "build_input_shape": [null, 28, 28]}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28]}})";

std::string Seq(const std::vector<std::string>& layers, int input = 3) {
  std::string s = absl::StrCat(
      R"({"class_name":"Sequential","config":{"name":"m","layers":[{"class_name":"InputLayer","config":{"batch_input_shape":[null,)",
      input, "]}}");
  for (const auto& l : layers) s += "," + l;
  return s + "]}}";
}

std::string Dense(int units, const std::string& act, bool bias = true) {
  return absl::StrCat(R"({"class_name":"Dense","config":{"units":)", units,
                      R"(,"activation":")", act, R"(","use_bias":)", bias ? "true" : "false",
                      "}}");
}

Tensor RandomTensor(std::vector<int64_t> shape, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t(std::move(shape));
  for (float& v : t.values()) v = d(rng);
  return t;
}

class ModelTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend_ = CreateCpuBackend();
};

TEST_F(ModelTest, ParsesKeras2) {
  auto m = Model::FromKerasJsonText(kKeras2, backend_.get());
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& v = (*m)->trainable_variables();
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].name, "dense/kernel");
  EXPECT_EQ(v[0].shape, (std::vector<int64_t>{784, 64}));
  EXPECT_EQ(v[1].name, "dense/bias");
  EXPECT_EQ(v[2].name, "dense_1/kernel");
  EXPECT_EQ(v[3].shape, (std::vector<int64_t>{10}));
  EXPECT_EQ((*m)->input_size(), 784);
  EXPECT_EQ((*m)->output_size(), 10);
}

TEST_F(ModelTest, ParsesKeras3) {
  auto m = Model::FromKerasJsonText(kKeras3, backend_.get());
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& v = (*m)->trainable_variables();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].name, "hidden/kernel");
  EXPECT_EQ(v[0].shape, (std::vector<int64_t>{784, 32}));
  EXPECT_EQ(v[2].name, "logits/kernel");
  EXPECT_EQ((*m)->input_shape(), (std::vector<int64_t>{28, 28}));
  EXPECT_EQ((*m)->input_size(), 784);
  // x may be given as [B,28,28] or [B,784].
  ASSERT_TRUE((*m)->SetLoss({LossConfig::Kind::kSparseCategoricalCrossentropy, true}).ok());
  auto w = (*m)->InitialValues(1);
  std::vector<Tensor> g;
  Tensor y({2}, {1, 9});
  EXPECT_TRUE((*m)->TrainStep(w, Tensor({2, 28, 28}), y, 0, &g).ok());
  EXPECT_TRUE((*m)->TrainStep(w, Tensor({2, 784}), y, 0, &g).ok());
}

TEST_F(ModelTest, GeneratesKerasNames) {
  auto m = Model::FromKerasJsonText(Seq({Dense(4, "relu"), Dense(2, "linear")}), backend_.get());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->trainable_variables()[2].name, "dense_1/kernel");
}

void ExpectInvalid(const absl::Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s;
}

TEST_F(ModelTest, RejectsUnsupported) {
  ExpectInvalid(Model::FromKerasJsonText(
                    Seq({R"({"class_name":"Conv2D","config":{"filters":3}})"}), backend_.get())
                    .status(),
                "Conv2D");
  ExpectInvalid(
      Model::FromKerasJsonText(
          Seq({R"({"class_name":"Dense","config":{"units":2,"kernel_regularizer":{"class_name":"L2","config":{"l2":0.01}}}})"}),
          backend_.get())
          .status(),
      "kernel_regularizer");
  ExpectInvalid(
      Model::FromKerasJsonText(
          Seq({R"({"class_name":"Dense","config":{"units":2,"activity_regularizer":{"class_name":"L1"}}})"}),
          backend_.get())
          .status(),
      "activity_regularizer");
  ExpectInvalid(Model::FromKerasJsonText(Seq({Dense(2, "gelu")}), backend_.get()).status(),
                "gelu");
  ExpectInvalid(
      Model::FromKerasJsonText(
          R"({"class_name":"Sequential","config":{"layers":[{"class_name":"Dense","config":{"units":2}}]}})",
          backend_.get())
          .status(),
      "input size is unknown");
  ExpectInvalid(Model::FromKerasJsonText("{not json", backend_.get()).status(), "malformed");
  ExpectInvalid(Model::FromKerasJsonText(R"({"class_name":"Functional","config":{}})",
                                         backend_.get())
                    .status(),
                "Functional");
}

TEST_F(ModelTest, InitialValuesFollowInitializers) {
  auto m = Model::FromKerasJsonText(kKeras2, backend_.get());
  ASSERT_TRUE(m.ok());
  auto a = (*m)->InitialValues(5);
  auto b = (*m)->InitialValues(5);
  auto c = (*m)->InitialValues(6);
  EXPECT_EQ(a[0].ShapeString(), "[784,64]");
  EXPECT_EQ(std::vector<float>(a[0].values().begin(), a[0].values().end()),
            std::vector<float>(b[0].values().begin(), b[0].values().end()));
  EXPECT_NE(a[0].values()[0], c[0].values()[0]);
  const float limit = std::sqrt(6.0f / (784 + 64));
  double sum_sq = 0;
  for (float v : a[0].values()) {
    EXPECT_LE(std::fabs(v), limit);
    sum_sq += v * v;
  }
  // Uniform(-l, l) has variance l^2 / 3.
  EXPECT_NEAR(sum_sq / a[0].num_elements(), limit * limit / 3, 0.05 * limit * limit / 3);
  for (float v : a[1].values()) EXPECT_EQ(v, 0.0f);
  // An initializer's own seed wins over the model seed.
  auto m3 = Model::FromKerasJsonText(kKeras3, backend_.get());
  ASSERT_TRUE(m3.ok());
  EXPECT_EQ((*m3)->InitialValues(1)[0].values()[0], (*m3)->InitialValues(2)[0].values()[0]);
  EXPECT_NE((*m3)->InitialValues(1)[2].values()[0], (*m3)->InitialValues(2)[2].values()[0]);
}

// Checks TrainStep's gradients against central differences of the mean training loss
// (dropout masks depend only on the seed, so the loss is a fixed function of the weights).
void GradCheck(Backend* backend, const std::string& model_json, const LossConfig& loss,
               const Tensor& x, const Tensor& y, uint32_t seed,
               const LayerRegistry* registry = nullptr) {
  auto m = Model::FromKerasJsonText(model_json, backend,
                                    registry ? *registry : LayerRegistry::Default());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->SetLoss(loss).ok());
  std::vector<Tensor> w = (*m)->InitialValues(seed);
  // Non-zero biases so every path is exercised.
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i].shape().size() == 1) w[i] = RandomTensor(w[i].shape(), seed + i, -0.3f, 0.3f);
  }
  std::vector<Tensor> grads;
  auto r = (*m)->TrainStep(w, x, y, 99, &grads);
  ASSERT_TRUE(r.ok()) << r.status();
  const double batch = static_cast<double>(x.shape()[0]);
  auto loss_at = [&](std::vector<Tensor>& ww) {
    std::vector<Tensor> tmp;
    auto s = (*m)->TrainStep(ww, x, y, 99, &tmp);
    EXPECT_TRUE(s.ok());
    return s->loss_sum / batch;
  };
  // Small enough that a ReLU kink is rarely crossed, large enough for float noise.
  const float eps = 1e-3f;
  int checked = 0;
  for (size_t v = 0; v < w.size(); ++v) {
    for (int64_t i = 0; i < w[v].num_elements(); ++i) {
      const float orig = w[v].data()[i];
      w[v].data()[i] = orig + eps;
      const double up = loss_at(w);
      w[v].data()[i] = orig - eps;
      const double down = loss_at(w);
      w[v].data()[i] = orig;
      const double numeric = (up - down) / (2 * eps);
      const double analytic = grads[v].data()[i];
      EXPECT_NEAR(analytic, numeric, 1e-2 * std::max(std::fabs(numeric), 0.1))
          << (*m)->trainable_variables()[v].name << "[" << i << "] loss "
          << LossName(loss.kind) << " logits=" << loss.from_logits;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

Tensor SparseLabels(int64_t batch, int classes) {
  Tensor y({batch});
  for (int64_t i = 0; i < batch; ++i) y.data()[i] = static_cast<float>((i * 7 + 1) % classes);
  return y;
}

Tensor OneHot(int64_t batch, int classes) {
  Tensor y({batch, classes});
  for (int64_t i = 0; i < batch; ++i) y.data()[i * classes + (i * 7 + 1) % classes] = 1.0f;
  return y;
}

TEST_F(ModelTest, GradientsOfEveryActivation) {
  const Tensor x = RandomTensor({5, 3}, 11);
  const LossConfig mse{LossConfig::Kind::kMeanSquaredError, false};
  const Tensor y = RandomTensor({5, 4}, 12);
  for (const char* act : {"linear", "relu", "sigmoid", "tanh", "softmax"}) {
    SCOPED_TRACE(act);
    // As a Dense activation and as an Activation layer, with Dropout and Flatten between.
    GradCheck(backend_.get(),
              Seq({Dense(6, act), R"({"class_name":"Dropout","config":{"rate":0.3}})",
                   R"({"class_name":"Flatten","config":{}})", Dense(4, "linear"),
                   absl::StrCat(R"({"class_name":"Activation","config":{"activation":")", act,
                                R"("}})")}),
              mse, x, y, 3);
  }
}

TEST_F(ModelTest, GradientsOfEveryLoss) {
  const Tensor x = RandomTensor({6, 3}, 21);
  using K = LossConfig::Kind;
  for (bool logits : {false, true}) {
    for (const char* last : {"softmax", "linear", "sigmoid"}) {
      SCOPED_TRACE(absl::StrCat(last, " logits=", logits));
      // Probabilities-based losses need a probability output.
      const bool probs_ok = logits || std::string(last) != "linear";
      if (probs_ok && std::string(last) != "sigmoid") {
        GradCheck(backend_.get(), Seq({Dense(5, "tanh"), Dense(4, last)}),
                  {K::kSparseCategoricalCrossentropy, logits}, x, SparseLabels(6, 4), 4);
        GradCheck(backend_.get(), Seq({Dense(5, "tanh"), Dense(4, last)}),
                  {K::kCategoricalCrossentropy, logits}, x, OneHot(6, 4), 5);
      }
      if (probs_ok && std::string(last) != "softmax") {
        Tensor t = RandomTensor({6, 2}, 22, 0.0f, 1.0f);
        GradCheck(backend_.get(), Seq({Dense(5, "relu"), Dense(2, last)}),
                  {K::kBinaryCrossentropy, logits}, x, t, 6);
      }
    }
  }
  // Softmax as a separate Activation layer is fused too.
  GradCheck(backend_.get(),
            Seq({Dense(4, "linear"), R"({"class_name":"Activation","config":{"activation":"softmax"}})"}),
            {K::kSparseCategoricalCrossentropy, false}, x, SparseLabels(6, 4), 7);
  // Categorical CE on unnormalized (sigmoid) probabilities uses the normalizing path.
  GradCheck(backend_.get(), Seq({Dense(4, "sigmoid")}), {K::kCategoricalCrossentropy, false}, x,
            OneHot(6, 4), 8);
  GradCheck(backend_.get(), Seq({Dense(4, "sigmoid")}),
            {K::kSparseCategoricalCrossentropy, false}, x, SparseLabels(6, 4), 9);
  GradCheck(backend_.get(), Seq({Dense(3, "linear")}), {K::kMeanSquaredError, false}, x,
            RandomTensor({6, 3}, 23), 10);
}

TEST_F(ModelTest, FusedSoftmaxMatchesUnfusedLoss) {
  // from_logits=false with a softmax output must equal CE computed on the probabilities.
  auto fused = Model::FromKerasJsonText(Seq({Dense(4, "softmax")}), backend_.get());
  ASSERT_TRUE(fused.ok());
  ASSERT_TRUE((*fused)->SetLoss({LossConfig::Kind::kSparseCategoricalCrossentropy, false}).ok());
  auto w = (*fused)->InitialValues(3);
  const Tensor x = RandomTensor({5, 3}, 31);
  const Tensor y = SparseLabels(5, 4);
  auto r = (*fused)->Evaluate(w, x, y);
  ASSERT_TRUE(r.ok());
  auto probs = (*fused)->Predict(w, x);
  ASSERT_TRUE(probs.ok());
  double want = 0;
  for (int i = 0; i < 5; ++i) want -= std::log(probs->data()[i * 4 + static_cast<int>(y.data()[i])]);
  EXPECT_NEAR(r->loss_sum, want, 1e-4);
  EXPECT_EQ(r->samples, 5);
}

TEST_F(ModelTest, DropoutIsDeterministicPerSeedAndOffInEvaluate) {
  auto m = Model::FromKerasJsonText(kKeras2, backend_.get());
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->SetLoss({LossConfig::Kind::kSparseCategoricalCrossentropy, false}).ok());
  auto w = (*m)->InitialValues(1);
  const Tensor x = RandomTensor({8, 784}, 2);
  const Tensor y = SparseLabels(8, 10);
  std::vector<Tensor> g1, g2, g3;
  auto a = (*m)->TrainStep(w, x, y, 5, &g1);
  auto b = (*m)->TrainStep(w, x, y, 5, &g2);
  auto c = (*m)->TrainStep(w, x, y, 6, &g3);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->loss_sum, b->loss_sum);
  EXPECT_NE(a->loss_sum, c->loss_sum);
  auto e1 = (*m)->Evaluate(w, x, y);
  auto e2 = (*m)->Evaluate(w, x, y);
  ASSERT_TRUE(e1.ok() && e2.ok());
  EXPECT_EQ(e1->loss_sum, e2->loss_sum);
}

TEST_F(ModelTest, ValidatesShapes) {
  auto m = Model::FromKerasJsonText(kKeras2, backend_.get());
  ASSERT_TRUE(m.ok());
  auto w = (*m)->InitialValues(1);
  std::vector<Tensor> g;
  EXPECT_EQ((*m)->TrainStep(w, Tensor({2, 784}), Tensor({2}), 0, &g).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*m)->SetLoss({LossConfig::Kind::kSparseCategoricalCrossentropy, false}).ok());
  ExpectInvalid((*m)->TrainStep(w, Tensor({2, 783}), Tensor({2}), 0, &g).status(), "[2,783]");
  ExpectInvalid((*m)->TrainStep(w, Tensor({2, 784}), Tensor({3}), 0, &g).status(), "[3]");
  ExpectInvalid((*m)->TrainStep(w, Tensor({2, 784}), Tensor({2}, {0, 10}), 0, &g).status(),
                "label 10");
  std::vector<Tensor> bad = w;
  bad[1] = Tensor({65});
  ExpectInvalid((*m)->TrainStep(bad, Tensor({2, 784}), Tensor({2}), 0, &g).status(),
                "dense/bias");
  bad.pop_back();
  ExpectInvalid((*m)->Evaluate(bad, Tensor({2, 784}), Tensor({2})).status(), "3 weights");
}

// The 784-64-10 model with Adam learns a separable synthetic problem.
TEST_F(ModelTest, LearnsSeparableProblemWithAdam) {
  auto m = Model::FromKerasJsonText(kKeras2, backend_.get());
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->SetLoss({LossConfig::Kind::kSparseCategoricalCrossentropy, false}).ok());
  auto opt = Optimizer::Create([] {
    OptimizerConfig c;
    c.set_name("adam");
    return c;
  }());
  ASSERT_TRUE(opt.ok());
  std::vector<Tensor> w = (*m)->InitialValues(42);
  std::vector<std::unique_ptr<OptimizerState>> states;
  for (const Tensor& t : w) states.push_back((*opt)->NewState(t.num_elements()));

  const int kBatch = 64;
  Tensor centers = RandomTensor({10, 784}, 7);
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  auto make_batch = [&](Tensor* x, Tensor* y) {
    *x = Tensor({kBatch, 784});
    *y = Tensor({kBatch});
    for (int i = 0; i < kBatch; ++i) {
      const int label = static_cast<int>(rng() % 10);
      y->data()[i] = static_cast<float>(label);
      for (int j = 0; j < 784; ++j) {
        x->data()[i * 784 + j] = centers.data()[label * 784 + j] + noise(rng);
      }
    }
  };
  Tensor x_eval, y_eval;
  make_batch(&x_eval, &y_eval);
  auto before = (*m)->Evaluate(w, x_eval, y_eval);
  ASSERT_TRUE(before.ok());
  std::vector<Tensor> grads;
  for (int step = 0; step < 60; ++step) {
    Tensor x, y;
    make_batch(&x, &y);
    auto r = (*m)->TrainStep(w, x, y, step, &grads);
    ASSERT_TRUE(r.ok()) << r.status();
    for (size_t v = 0; v < w.size(); ++v) {
      (*opt)->Apply(grads[v].values(), w[v].values(), states[v].get());
    }
  }
  auto after = (*m)->Evaluate(w, x_eval, y_eval);
  ASSERT_TRUE(after.ok());
  EXPECT_LT(after->loss_sum, 0.2 * before->loss_sum);
  EXPECT_GE(after->correct, 60);
}

// ToKerasJson writes Keras 3's form, and reading it back gives the same model.
TEST_F(ModelTest, KerasJsonRoundTrip) {
  for (const char* text : {kKeras2, kKeras3}) {
    auto m = Model::FromKerasJsonText(text, backend_.get());
    ASSERT_TRUE(m.ok()) << m.status();
    const json written = (*m)->ToKerasJson();
    EXPECT_EQ(written["class_name"], "Sequential");
    const json& layers = written["config"]["layers"];
    ASSERT_EQ(layers.size(), (*m)->layers().size() + 1);
    EXPECT_EQ(layers[0]["class_name"], "InputLayer");
    EXPECT_EQ(layers[0]["config"]["batch_shape"], BatchShapeJson((*m)->input_shape()));
    for (size_t i = 1; i < layers.size(); ++i) {
      EXPECT_EQ(layers[i]["config"]["name"], (*m)->layers()[i - 1]->name());
      EXPECT_TRUE(layers[i]["build_config"].contains("input_shape"));
      EXPECT_EQ(layers[i]["config"]["dtype"]["config"]["name"], "float32");
    }
    auto back = Model::FromKerasJson(written, backend_.get());
    ASSERT_TRUE(back.ok()) << back.status() << written.dump();
    ASSERT_EQ((*back)->variables().size(), (*m)->variables().size());
    for (size_t v = 0; v < (*m)->variables().size(); ++v) {
      EXPECT_EQ((*back)->variables()[v].name, (*m)->variables()[v].name);
      EXPECT_EQ((*back)->variables()[v].shape, (*m)->variables()[v].shape);
    }
    // Same initializers (seeds included) and the same outputs.
    const auto w = (*m)->InitialValues(9);
    const auto w2 = (*back)->InitialValues(9);
    for (size_t v = 0; v < w.size(); ++v) {
      EXPECT_EQ(std::vector<float>(w[v].values().begin(), w[v].values().end()),
                std::vector<float>(w2[v].values().begin(), w2[v].values().end()));
    }
    const Tensor x = RandomTensor({3, (*m)->input_size()}, 4);
    auto a = (*m)->Predict(w, x);
    auto b = (*back)->Predict(w, x);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(std::vector<float>(a->values().begin(), a->values().end()),
              std::vector<float>(b->values().begin(), b->values().end()));
    EXPECT_EQ((*back)->ToKerasJson(), written);
  }
}

// The engine knows no layer by name: a layer registered by a program runs like a built-in.
class ScaleByTwo : public Layer {
 public:
  static absl::StatusOr<std::unique_ptr<Layer>> FromConfig(LayerConfig& config) {
    return std::unique_ptr<Layer>(new ScaleByTwo());
  }
  const float* Forward(const ForwardPass& p) override {
    const int64_t n = p.batch * NumElements(input_shape());
    p.backend->Gemm(false, false, 1, n, 1, 1.0f, &two_, p.input, 0.0f, p.output);
    return p.output;
  }
  float* Backward(const BackwardPass& p) override {
    p.backend->Gemm(false, false, 1, p.batch * NumElements(input_shape()), 1, 1.0f, &two_,
                    p.dy, 0.0f, p.dx);
    return p.dx;
  }

 protected:
  absl::StatusOr<Shape> BuildShapes(const Shape& input) override { return input; }
  json KerasConfig() const override { return json::object(); }

 private:
  ScaleByTwo() : Layer("ScaleByTwo") {}
  float two_ = 2.0f;
};

TEST_F(ModelTest, RunsALayerFromAnotherRegistry) {
  LayerRegistry registry;
  ASSERT_TRUE(registry.Register({"ScaleByTwo", "scale_by_two", true, &ScaleByTwo::FromConfig}).ok());
  ASSERT_TRUE(registry.Register({"InputLayer", "input_layer", false, &InputLayer::FromConfig}).ok());
  ASSERT_TRUE(registry.Register({"Dense", "dense", true, &DenseLayer::FromConfig}).ok());
  EXPECT_EQ(registry.Register({"Dense", "dense", true, &DenseLayer::FromConfig}).code(),
            absl::StatusCode::kAlreadyExists);
  const std::string text =
      Seq({Dense(2, "linear", false), R"({"class_name":"ScaleByTwo","config":{}})"});
  // The default registry has no such layer.
  ExpectInvalid(Model::FromKerasJsonText(text, backend_.get()).status(), "ScaleByTwo");
  auto m = Model::FromKerasJsonText(text, backend_.get(), registry);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->layers()[1]->name(), "scale_by_two");
  const std::vector<Tensor> w = {Tensor({3, 2}, {1, 0, 0, 1, 1, 1})};
  auto out = (*m)->Predict(w, Tensor({1, 3}, {1, 2, 3}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(std::vector<float>(out->values().begin(), out->values().end()),
            (std::vector<float>{8, 10}));
  GradCheck(backend_.get(), text, {LossConfig::Kind::kMeanSquaredError, false},
            RandomTensor({4, 3}, 5), RandomTensor({4, 2}, 6), 7, &registry);
}

TEST_F(ModelTest, RejectsMisspelledKeysAndCategoricalLossOnSequences) {
  ExpectInvalid(
      Model::FromKerasJsonText(
          Seq({R"({"class_name":"Dense","config":{"name":"hidden","units":4,"activaton":"relu"}})"}),
          backend_.get())
          .status(),
      "layer 1 'hidden' (Dense): unknown config key \"activaton\"");
  // Dense on a rank-2 input works per row, as in Keras; a per-sample loss then needs Flatten.
  auto m = Model::FromKerasJsonText(
      R"({"class_name":"Sequential","config":{"layers":[{"class_name":"InputLayer","config":{"batch_shape":[null,3,4]}},{"class_name":"Dense","config":{"units":5}}]}})",
      backend_.get());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->output_shape(), (std::vector<int64_t>{3, 5}));
  ExpectInvalid((*m)->SetLoss({LossConfig::Kind::kSparseCategoricalCrossentropy, false}),
                "add a Flatten");
  EXPECT_TRUE((*m)->SetLoss({LossConfig::Kind::kMeanSquaredError, false}).ok());
}

}  // namespace
}  // namespace pstrain
