#include "common/model/optimizer.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

// Applies `steps` updates with a constant gradient 0.5 to w = 1 and returns each new w.
std::vector<float> RunSteps(const OptimizerConfig& config, int steps) {
  auto opt = Optimizer::Create(config);
  EXPECT_TRUE(opt.ok()) << opt.status();
  auto state = (*opt)->NewState(1);
  std::vector<float> w = {1.0f};
  const std::vector<float> g = {0.5f};
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) {
    (*opt)->Apply(g, absl::MakeSpan(w), state.get());
    out.push_back(w[0]);
  }
  EXPECT_EQ(state->iterations(), steps);
  return out;
}

OptimizerConfig Config(const std::string& name) {
  OptimizerConfig c;
  c.set_name(name);
  return c;
}

TEST(OptimizerTest, SgdPlainMomentumNesterov) {
  auto plain = RunSteps(Config("sgd"), 2);  // lr 0.01 default
  EXPECT_NEAR(plain[0], 0.995f, 1e-6);
  EXPECT_NEAR(plain[1], 0.990f, 1e-6);
  OptimizerConfig c = Config("SGD");
  c.set_learning_rate(0.1f);
  c.set_momentum(0.9f);
  auto mom = RunSteps(c, 3);
  // m1 = -0.05, w = 0.95; m2 = -0.095, w = 0.855; m3 = -0.1355, w = 0.7195.
  EXPECT_NEAR(mom[0], 0.95f, 1e-6);
  EXPECT_NEAR(mom[1], 0.855f, 1e-6);
  EXPECT_NEAR(mom[2], 0.7195f, 1e-6);
  c.set_nesterov(true);
  auto nes = RunSteps(c, 2);
  // w += mu*m - lr*g: 1 - 0.045 - 0.05 = 0.905; m2 = -0.095: 0.905 - 0.0855 - 0.05.
  EXPECT_NEAR(nes[0], 0.905f, 1e-6);
  EXPECT_NEAR(nes[1], 0.7695f, 1e-6);
}

TEST(OptimizerTest, AdamMatchesKerasFormula) {
  auto w = RunSteps(Config("adam"), 3);
  // Constant gradient: m_t = 0.5 (1 - 0.9^t), v_t = 0.25 (1 - 0.999^t), so
  // alpha_t * m_t / sqrt(v_t) = lr exactly, up to epsilon: each step moves ~0.001.
  EXPECT_NEAR(w[0], 1.0f - 0.001f, 1e-6);
  EXPECT_NEAR(w[1], 1.0f - 0.002f, 1e-6);
  EXPECT_NEAR(w[2], 1.0f - 0.003f, 1e-6);
  // A changing gradient, by hand: g1 = 1, g2 = -1, lr 0.1.
  OptimizerConfig c = Config("adam");
  c.set_learning_rate(0.1f);
  auto opt = Optimizer::Create(c);
  ASSERT_TRUE(opt.ok());
  auto state = (*opt)->NewState(1);
  std::vector<float> v = {0.0f};
  (*opt)->Apply(std::vector<float>{1.0f}, absl::MakeSpan(v), state.get());
  EXPECT_NEAR(v[0], -0.1f, 1e-5);  // m=0.1, v=0.001, alpha=0.1*sqrt(.001)/.1
  (*opt)->Apply(std::vector<float>{-1.0f}, absl::MakeSpan(v), state.get());
  // m = 0.09 - 0.1 = -0.01, v = 0.000999 + 0.001 = 0.001999,
  // alpha = 0.1 * sqrt(1 - 0.998001) / (1 - 0.81) = 0.1 * 0.04471018 / 0.19 = 0.02353168,
  // step = 0.02353168 * -0.01 / 0.04471018 = -0.00526316 -> w = -0.1 + 0.00526316.
  EXPECT_NEAR(v[0], -0.09473684f, 1e-5);
}

TEST(OptimizerTest, Adagrad) {
  OptimizerConfig c = Config("adagrad");
  c.set_learning_rate(0.1f);
  auto w = RunSteps(c, 2);
  // acc = 0.1 + 0.25 = 0.35: w -= 0.1 * 0.5 / sqrt(0.35); acc = 0.6: w -= 0.05 / sqrt(0.6).
  EXPECT_NEAR(w[0], 0.9154846f, 1e-6);
  EXPECT_NEAR(w[1], 0.8509349f, 1e-6);
}

TEST(OptimizerTest, RmsProp) {
  OptimizerConfig c = Config("rmsprop");
  c.set_learning_rate(0.01f);
  auto w = RunSteps(c, 2);
  // v = 0.025: w -= 0.005 / sqrt(0.025); v = 0.0475: w -= 0.005 / sqrt(0.0475).
  EXPECT_NEAR(w[0], 0.9683772f, 1e-6);
  EXPECT_NEAR(w[1], 0.9454356f, 1e-6);
  c.set_momentum(0.5f);
  auto m = RunSteps(c, 2);
  // m1 = 0.0316228; m2 = 0.0158114 + 0.0229416 = 0.0387530.
  EXPECT_NEAR(m[0], 0.9683772f, 1e-6);
  EXPECT_NEAR(m[1], 0.9296242f, 1e-6);
}

// Every optimizer's own check agrees with running the update on copies (the base class's
// way) on updates that overflow and ones that do not, and changes nothing.
TEST(OptimizerTest, UpdateStaysFiniteMatchesTheUpdateAndChangesNothing) {
  std::vector<OptimizerConfig> configs;
  for (const char* name : {"sgd", "adam", "adagrad", "rmsprop"}) configs.push_back(Config(name));
  OptimizerConfig momentum = Config("sgd");
  momentum.set_momentum(0.9f);
  configs.push_back(momentum);
  momentum.set_nesterov(true);
  configs.push_back(momentum);
  OptimizerConfig rms_momentum = Config("rmsprop");
  rms_momentum.set_momentum(0.5f);
  configs.push_back(rms_momentum);
  OptimizerConfig huge_lr = Config("sgd");
  huge_lr.set_learning_rate(1e30f);
  configs.push_back(huge_lr);
  const float kMax = 3.4e38f;
  int overflows = 0;
  for (const OptimizerConfig& config : configs) {
    auto opt = Optimizer::Create(config);
    ASSERT_TRUE(opt.ok()) << opt.status();
    for (float g : {0.5f, -1e9f, 1e18f, 1e20f, kMax, -kMax}) {
      for (float w0 : {1.0f, kMax, -kMax}) {
        auto state = (*opt)->NewState(2);
        // One ordinary step first, so that slots are not all zero.
        std::vector<float> w = {w0, 1.0f};
        (*opt)->Apply(std::vector<float>{0.25f, 0.25f}, absl::MakeSpan(w), state.get());
        const std::vector<float> w_before = w;
        std::vector<std::vector<float>> slots_before;
        for (const auto& [name, slot] : state->slots()) slots_before.push_back(*slot);
        const std::vector<float> grad = {g, 0.5f};
        const bool finite = (*opt)->UpdateStaysFinite(grad, w, *state);
        EXPECT_EQ(finite, (*opt)->Optimizer::UpdateStaysFinite(grad, w, *state))
            << config.ShortDebugString() << " g " << g << " w " << w0;
        EXPECT_EQ(w, w_before);
        size_t i = 0;
        for (const auto& [name, slot] : state->slots()) EXPECT_EQ(*slot, slots_before[i++]);
        EXPECT_EQ(state->iterations(), 1);
        if (!finite) ++overflows;
      }
    }
  }
  EXPECT_GT(overflows, 0);
  // Adam squares the gradient: 1e18 is fine, 1e20 is not.
  auto adam = Optimizer::Create(Config("adam"));
  ASSERT_TRUE(adam.ok());
  auto state = (*adam)->NewState(1);
  const std::vector<float> w = {1.0f};
  EXPECT_TRUE((*adam)->UpdateStaysFinite(std::vector<float>{1e18f}, w, *state));
  EXPECT_FALSE((*adam)->UpdateStaysFinite(std::vector<float>{1e20f}, w, *state));
}

// ApplyInto writes exactly what Apply stores (values, slots and count), says whether it is
// finite as UpdateStaysFinite does, and leaves its inputs alone; the base class's way
// (Apply on copies) agrees with every optimizer's own one-pass kernel.
TEST(OptimizerTest, ApplyIntoWritesWhatApplyStoresAndChangesNothing) {
  std::vector<OptimizerConfig> configs;
  for (const char* name : {"sgd", "adam", "adagrad", "rmsprop"}) configs.push_back(Config(name));
  OptimizerConfig momentum = Config("sgd");
  momentum.set_momentum(0.9f);
  momentum.set_nesterov(true);
  configs.push_back(momentum);
  OptimizerConfig rms_momentum = Config("rmsprop");
  rms_momentum.set_momentum(0.5f);
  configs.push_back(rms_momentum);
  const float kMax = 3.4e38f;
  constexpr size_t kN = 37;  // not a multiple of a vector's width: the loops' tails run too
  int overflows = 0;
  for (const OptimizerConfig& config : configs) {
    auto opt = Optimizer::Create(config);
    ASSERT_TRUE(opt.ok()) << opt.status();
    for (float big : {0.5f, 1e20f, kMax}) {
      auto state = (*opt)->NewState(kN);
      std::vector<float> w(kN), grad(kN);
      for (size_t i = 0; i < kN; ++i) {
        w[i] = 0.1f * static_cast<float>(i) - 1.0f;
        grad[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
      }
      (*opt)->Apply(grad, absl::MakeSpan(w), state.get());  // slots not all zero
      grad[kN - 1] = big;  // an overflow, if any, in the last element
      const std::vector<float> w_before = w;
      const OptimizerState state_before = *state;
      std::vector<float> expected_w = w;
      OptimizerState expected_state = *state;
      (*opt)->Apply(grad, absl::MakeSpan(expected_w), &expected_state);
      const bool finite = (*opt)->UpdateStaysFinite(grad, w, *state);
      for (bool base_class : {false, true}) {
        std::vector<float> out_w(kN, 7.0f);
        auto out_state = (*opt)->NewState(kN);
        const bool into_finite =
            base_class ? (*opt)->Optimizer::ApplyInto(grad, w, *state, absl::MakeSpan(out_w),
                                                      out_state.get())
                       : (*opt)->ApplyInto(grad, w, *state, absl::MakeSpan(out_w),
                                           out_state.get());
        SCOPED_TRACE(config.ShortDebugString() + " big " + std::to_string(big) +
                     (base_class ? " base class" : ""));
        EXPECT_EQ(into_finite, finite);
        EXPECT_EQ(out_state->iterations(), expected_state.iterations());
        // Bitwise, NaNs included: compare the bytes.
        EXPECT_EQ(std::memcmp(out_w.data(), expected_w.data(), kN * sizeof(float)), 0);
        auto out_slots = out_state->slots();
        auto expected_slots = expected_state.slots();
        ASSERT_EQ(out_slots.size(), expected_slots.size());
        for (size_t k = 0; k < out_slots.size(); ++k) {
          EXPECT_EQ(std::memcmp(out_slots[k].second->data(), expected_slots[k].second->data(),
                                kN * sizeof(float)),
                    0)
              << out_slots[k].first;
        }
        EXPECT_EQ(w, w_before);
        EXPECT_EQ(state->iterations(), state_before.iterations());
        auto slots = state->slots();
        auto slots_before = const_cast<OptimizerState&>(state_before).slots();
        for (size_t k = 0; k < slots.size(); ++k) EXPECT_EQ(*slots[k].second, *slots_before[k].second);
      }
      if (!finite) ++overflows;
    }
  }
  EXPECT_GT(overflows, 0);
}

TEST(OptimizerTest, StateExposesSlotsByName) {
  auto opt = Optimizer::Create(Config("adam"));
  ASSERT_TRUE(opt.ok());
  auto state = (*opt)->NewState(4);
  auto slots = state->slots();
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0].first, "momentum");
  EXPECT_EQ(slots[1].first, "velocity");
  EXPECT_EQ(slots[0].second->size(), 4u);
  auto ada = Optimizer::Create(Config("adagrad"));
  auto s2 = (*ada)->NewState(3);
  EXPECT_FLOAT_EQ((*s2->slots()[0].second)[0], 0.1f);
}

TEST(OptimizerTest, UnsetFieldsMeanKerasDefaults) {
  auto opt = Optimizer::Create(Config("adam"));
  ASSERT_TRUE(opt.ok());
  EXPECT_FLOAT_EQ((*opt)->config().learning_rate(), 0.001f);
  EXPECT_FLOAT_EQ((*opt)->config().beta_2(), 0.999f);
  EXPECT_FLOAT_EQ((*opt)->config().epsilon(), 1e-7f);
  EXPECT_EQ(Optimizer::Create(Config("lamb")).status().code(),
            absl::StatusCode::kInvalidArgument);
  OptimizerConfig bad = Config("sgd");
  bad.set_learning_rate(-1.0f);
  EXPECT_EQ(Optimizer::Create(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// A value that is given is used or refused, never replaced by Keras's default: over
// gRPC an SGD learning_rate of 0 used to apply 0.01, and in a job spec 0 became 0.001.
TEST(OptimizerTest, GivenZeroIsRefusedOrKeptNeverDefaulted) {
  for (const char* name : {"sgd", "adam", "adagrad", "rmsprop"}) {
    OptimizerConfig c = Config(name);
    c.set_learning_rate(0.0f);
    absl::StatusOr<std::unique_ptr<Optimizer>> opt = Optimizer::Create(c);
    EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(opt.status().message().find("learning_rate 0 is out of range"), std::string::npos)
        << opt.status();
  }
  for (float lr : {-0.5f, std::nanf(""), INFINITY}) {
    OptimizerConfig c = Config("sgd");
    c.set_learning_rate(lr);
    EXPECT_EQ(Optimizer::Create(c).status().code(), absl::StatusCode::kInvalidArgument) << lr;
  }
  OptimizerConfig zero_beta = Config("adam");
  zero_beta.set_beta_1(0.0f);
  auto adam = Optimizer::Create(zero_beta);
  ASSERT_TRUE(adam.ok()) << adam.status();
  EXPECT_EQ((*adam)->config().beta_1(), 0.0f);
  OptimizerConfig zero_eps = Config("adam");
  zero_eps.set_epsilon(0.0f);
  EXPECT_EQ(Optimizer::Create(zero_eps).status().code(), absl::StatusCode::kInvalidArgument);

  auto keras = OptimizerConfigFromKeras(json::parse(R"({"class_name":"SGD","config":{"learning_rate":0}})"));
  EXPECT_EQ(keras.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(keras.status().message().find("learning_rate 0"), std::string::npos);
  auto huge = OptimizerConfigFromKeras(json::parse(R"({"class_name":"SGD","config":{"learning_rate":1e300}})"));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  auto momentum_zero = OptimizerConfigFromKeras(
      json::parse(R"({"class_name":"RMSprop","config":{"rho":0,"momentum":0}})"));
  ASSERT_TRUE(momentum_zero.ok()) << momentum_zero.status();
  EXPECT_EQ(momentum_zero->rho(), 0.0f);
  auto no_initial = OptimizerConfigFromKeras(json::parse(
      R"({"class_name":"SGD","config":{"learning_rate":{"class_name":"ExponentialDecay",)"
      R"("config":{"decay_steps":2,"decay_rate":0.5}}}})"));
  EXPECT_EQ(no_initial.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OptimizerTest, FromKeras) {
  for (const char* s : {"adam", "sgd", "SGD", "rmsprop", "adagrad", "Adam", "RMSprop"}) {
    EXPECT_TRUE(OptimizerConfigFromKeras(json(s)).ok()) << s;
  }
  auto k2 = OptimizerConfigFromKeras(json::parse(
      R"({"class_name":"Adam","config":{"name":"Adam","learning_rate":0.01,"decay":0.0,"beta_1":0.8,"beta_2":0.99,"epsilon":1e-07,"amsgrad":false}})"));
  ASSERT_TRUE(k2.ok()) << k2.status();
  EXPECT_EQ(k2->name(), "adam");
  EXPECT_FLOAT_EQ(k2->learning_rate(), 0.01f);
  EXPECT_FLOAT_EQ(k2->beta_1(), 0.8f);
  auto k3 = OptimizerConfigFromKeras(json::parse(
      R"({"module":"keras.optimizers","class_name":"SGD","config":{"name":"SGD","learning_rate":0.05,"weight_decay":null,"clipnorm":null,"global_clipnorm":null,"clipvalue":null,"use_ema":false,"ema_momentum":0.99,"ema_overwrite_frequency":null,"loss_scale_factor":null,"gradient_accumulation_steps":null,"momentum":0.9,"nesterov":true},"registered_name":null})"));
  ASSERT_TRUE(k3.ok()) << k3.status();
  EXPECT_EQ(k3->name(), "sgd");
  EXPECT_FLOAT_EQ(k3->momentum(), 0.9f);
  EXPECT_TRUE(k3->nesterov());

  auto unknown = OptimizerConfigFromKeras(json("nadam"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("nadam"), std::string::npos);
  auto not_number = OptimizerConfigFromKeras(
      json::parse(R"({"class_name":"Adam","config":{"learning_rate":"fast"}})"));
  EXPECT_EQ(not_number.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_number.status().message().find("learning_rate"), std::string::npos);
  auto schedule = OptimizerConfigFromKeras(json::parse(
      R"({"class_name":"Adam","config":{"learning_rate":{"class_name":"ExponentialDecay"}}})"));
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
  auto clip = OptimizerConfigFromKeras(
      json::parse(R"({"class_name":"Adam","config":{"clipnorm":1.0}})"));
  EXPECT_NE(clip.status().message().find("clipnorm"), std::string::npos);
}

// The kind is read once where a config comes in: from `kind`, or from `name` when a client
// from before the field sends only that; both set must agree; an unknown one is refused
// with a message that says what is supported.
TEST(OptimizerKindTest, ReadFromTheKindOrAnOlderClientsNameOnce) {
  for (const char* name : {"sgd", "SGD", "Adam", "adagrad", "RMSprop"}) {
    auto kind = OptimizerKindFromName(name);
    ASSERT_TRUE(kind.ok()) << name;
    OptimizerConfig old_client;
    old_client.set_name(name);
    auto from_name = Optimizer::Create(old_client);
    ASSERT_TRUE(from_name.ok()) << from_name.status();
    EXPECT_EQ((*from_name)->config().kind(), *kind);
    OptimizerConfig new_client;
    new_client.set_kind(*kind);
    auto from_kind = Optimizer::Create(new_client);
    ASSERT_TRUE(from_kind.ok()) << from_kind.status();
    // The same resolved config either way, its name written for a ps from before `kind`.
    EXPECT_EQ((*from_kind)->config().SerializeAsString(),
              (*from_name)->config().SerializeAsString());
    EXPECT_EQ((*from_kind)->name(), OptimizerKindName(*kind));
  }
  EXPECT_EQ(OptimizerKindName(OPTIMIZER_ADAM), "adam");
  EXPECT_EQ(OptimizerKindName(OPTIMIZER_KIND_UNSPECIFIED), "");

  OptimizerConfig unknown_name;
  unknown_name.set_name("lamb");
  absl::Status status = Optimizer::Create(unknown_name).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("unknown optimizer \"lamb\" (supported: sgd, adam"),
            std::string::npos)
      << status;
  OptimizerConfig newer_client;  // a kind this build does not know
  newer_client.set_kind(static_cast<OptimizerKind>(99));
  status = Optimizer::Create(newer_client).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("unknown optimizer kind 99"), std::string::npos) << status;
  OptimizerConfig disagreeing;
  disagreeing.set_name("sgd");
  disagreeing.set_kind(OPTIMIZER_ADAM);
  status = Optimizer::Create(disagreeing).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("\"sgd\" and kind adam disagree"), std::string::npos)
      << status;
  EXPECT_FALSE(Optimizer::Create(OptimizerConfig()).ok());  // neither

  // A job spec is such an edge: its config carries the kind.
  auto keras = OptimizerConfigFromKeras(json{{"class_name", "RMSprop"}, {"config", json::object()}});
  ASSERT_TRUE(keras.ok()) << keras.status();
  EXPECT_EQ(keras->kind(), OPTIMIZER_RMSPROP);
  EXPECT_EQ(keras->name(), "rmsprop");
  auto short_form = OptimizerConfigFromKeras(json("Adagrad"));
  ASSERT_TRUE(short_form.ok()) << short_form.status();
  EXPECT_EQ(short_form->kind(), OPTIMIZER_ADAGRAD);
  // And back to Keras from a config that names only its kind.
  OptimizerConfig kind_only;
  kind_only.set_kind(OPTIMIZER_ADAM);
  EXPECT_EQ(OptimizerConfigToKeras(kind_only)["class_name"], "Adam");
}

TEST(OptimizerTest, ExponentialDecayScheduleFollowsKerasFormula) {
  // Keras: lr(t) = initial * decay_rate ^ (t / decay_steps), t = updates applied so far.
  auto config = OptimizerConfigFromKeras(json::parse(R"({"class_name": "SGD", "config": {
      "learning_rate": {"module": "keras.optimizers.schedules", "class_name": "ExponentialDecay",
        "config": {"initial_learning_rate": 0.1, "decay_steps": 2, "decay_rate": 0.5,
                   "staircase": false, "name": "ExponentialDecay"}, "registered_name": null}}})"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto sgd = Optimizer::Create(*config);
  ASSERT_TRUE(sgd.ok());
  auto state = (*sgd)->NewState(1);
  std::vector<float> w = {0.0f};
  const std::vector<float> g = {1.0f};
  for (int i = 0; i < 3; ++i) (*sgd)->Apply(g, absl::MakeSpan(w), state.get());
  EXPECT_NEAR(w[0], -(0.1 + 0.1 * std::sqrt(0.5) + 0.05), 1e-6);

  OptimizerConfig staircase = *config;
  staircase.set_staircase(true);
  EXPECT_FLOAT_EQ(LearningRateAt(staircase, 1), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(staircase, 2), 0.05f);
  EXPECT_FLOAT_EQ(LearningRateAt(staircase, 5), 0.025f);

  // It survives the trip a chief makes to send it to the ps tasks.
  auto back = OptimizerConfigFromKeras(OptimizerConfigToKeras(staircase));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->lr_schedule(), "exponential_decay");
  EXPECT_TRUE(back->staircase());
  EXPECT_FLOAT_EQ(back->decay_steps(), 2.0f);

  auto cosine = OptimizerConfigFromKeras(json::parse(R"({"class_name": "Adam", "config": {
      "learning_rate": {"class_name": "CosineDecay", "config": {"initial_learning_rate": 0.1}}}})"));
  EXPECT_EQ(cosine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cosine.status().message().find("CosineDecay"), std::string::npos);
  auto no_steps = OptimizerConfigFromKeras(json::parse(R"({"class_name": "Adam", "config": {
      "learning_rate": {"class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.1,
        "decay_rate": 0.9}}}})"));
  EXPECT_EQ(no_steps.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OptimizerTest, KerasRoundTrip) {
  for (const char* s : {"adam", "sgd", "rmsprop", "adagrad"}) {
    auto c = OptimizerConfigFromKeras(json(s));
    ASSERT_TRUE(c.ok());
    auto back = OptimizerConfigFromKeras(OptimizerConfigToKeras(*c));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->SerializeAsString(), c->SerializeAsString()) << s;
  }
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

// A 4 x 2 table; rows 1 and 3 pushed sparsely, the same gradient densely (zeros elsewhere).
struct RowsVsDense {
  std::vector<float> sparse;
  std::vector<float> dense;
};

RowsVsDense ApplyBoth(const OptimizerConfig& config, int steps) {
  auto opt = Optimizer::Create(config);
  EXPECT_TRUE(opt.ok()) << opt.status();
  RowsVsDense out;
  out.sparse = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f, 3.0f, -2.0f};
  out.dense = out.sparse;
  auto sparse_state = (*opt)->NewState(8);
  auto dense_state = (*opt)->NewState(8);
  const std::vector<int64_t> rows = {3, 1};
  for (int step = 0; step < steps; ++step) {
    const float k = 1.0f + step;
    const std::vector<float> row_grads = {0.3f * k, -0.7f, 1.1f, -0.2f * k};  // rows 3, 1
    const std::vector<float> dense = {0, 0, 1.1f, -0.2f * k, 0, 0, 0.3f * k, -0.7f};
    (*opt)->ApplyRows(rows, row_grads, absl::MakeSpan(out.sparse), sparse_state.get());
    (*opt)->Apply(dense, absl::MakeSpan(out.dense), dense_state.get());
  }
  EXPECT_EQ(sparse_state->iterations(), steps);
  return out;
}

TEST(OptimizerRowsTest, SgdAndAdagradRowsEqualTheDenseUpdateExactly) {
  // Rows not pushed get a zero gradient in the dense update: SGD and Adagrad leave them
  // alone, and the rows pushed see the same float operations in the same order.
  for (const char* name : {"sgd", "adagrad"}) {
    SCOPED_TRACE(name);
    OptimizerConfig c;
    c.set_name(name);
    c.set_learning_rate(0.1f);
    const RowsVsDense r = ApplyBoth(c, 3);
    EXPECT_EQ(r.sparse, r.dense);
    EXPECT_EQ(r.sparse[0], 0.5f);  // row 0 untouched
    EXPECT_NE(r.sparse[2], 2.0f);  // row 1 moved
  }
}

TEST(OptimizerRowsTest, AdamRowsAreLazy) {
  OptimizerConfig c;
  c.set_name("adam");
  c.set_learning_rate(0.1f);
  auto opt = Optimizer::Create(c);
  ASSERT_TRUE(opt.ok());
  auto state = (*opt)->NewState(4);  // 4 rows of 1
  std::vector<float> w = {0, 0, 0, 0};
  // Step 1 touches rows 0 and 2 (g = 1, -1); step 2 touches row 0 only (g = -1).
  (*opt)->ApplyRows(std::vector<int64_t>{0, 2}, std::vector<float>{1.0f, -1.0f},
                    absl::MakeSpan(w), state.get());
  EXPECT_NEAR(w[0], -0.1f, 1e-5);  // as AdamMatchesKerasFormula's first step
  EXPECT_NEAR(w[2], 0.1f, 1e-5);
  const float w2 = w[2];
  const float m2 = (*state->slot("momentum"))[2];
  const float v2 = (*state->slot("velocity"))[2];
  EXPECT_NEAR(m2, -0.1f, 1e-6);
  EXPECT_NEAR(v2, 0.001f, 1e-7);
  (*opt)->ApplyRows(std::vector<int64_t>{0}, std::vector<float>{-1.0f}, absl::MakeSpan(w),
                    state.get());
  // Row 0: AdamMatchesKerasFormula's second step (t = 2): -0.09473684.
  EXPECT_NEAR(w[0], -0.09473684f, 1e-5);
  // Row 2 was not pushed: lazy Adam leaves it and its moments (m = -0.1, v = 0.001) as
  // they were, where a dense step with g = 0 would move it by alpha_2 * 0.09 / sqrt(0.000999).
  EXPECT_EQ(w[2], w2);
  EXPECT_EQ((*state->slot("momentum"))[2], m2);
  EXPECT_EQ((*state->slot("velocity"))[2], v2);
  EXPECT_EQ(w[1], 0.0f);
  EXPECT_EQ(w[3], 0.0f);
  EXPECT_EQ(state->iterations(), 2);
}

TEST(OptimizerRowsTest, RowUpdatesStayFiniteSeesOnlyThePushedRows) {
  OptimizerConfig c;
  c.set_name("adam");
  c.set_learning_rate(0.1f);
  auto opt = Optimizer::Create(c);
  ASSERT_TRUE(opt.ok());
  auto state = (*opt)->NewState(6);  // 3 rows of 2
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> rows = {2, 0};
  EXPECT_TRUE((*opt)->RowUpdatesStayFinite(rows, std::vector<float>{1, 1, 1, 1}, w, *state));
  // Adam squares 1e20 into its velocity: not a float.
  EXPECT_FALSE((*opt)->RowUpdatesStayFinite(rows, std::vector<float>{1, 1, 1e20f, 1}, w, *state));
  // Changed nothing.
  EXPECT_EQ(state->iterations(), 0);
  for (float v : *state->slot("velocity")) EXPECT_EQ(v, 0.0f);
  // A slot already infinite in an untouched row does not matter; in a pushed row it does.
  (*state->slot("momentum"))[2] = INFINITY;  // row 1
  EXPECT_TRUE((*opt)->RowUpdatesStayFinite(rows, std::vector<float>{1, 1, 1, 1}, w, *state));
  EXPECT_FALSE((*opt)->RowUpdatesStayFinite(std::vector<int64_t>{1}, std::vector<float>{1, 1}, w,
                                            *state));
  // The moving average has no kernel of its own for the check: the default runs ApplyRows
  // on copies of the rows. v - (v - o) * 0.5 of v = 3e38, o = -3e38 is not a float.
  auto* average = c.add_moving_averages();
  average->set_variable("stat");
  average->set_momentum(0.5f);
  auto rules = UpdateRules::Create(c);
  ASSERT_TRUE(rules.ok()) << rules.status();
  const Optimizer& moving = (*rules)->For("stat");
  auto moving_state = moving.NewState(4);
  const std::vector<float> stat = {1, 1, 3e38f, 3e38f};
  EXPECT_TRUE(moving.RowUpdatesStayFinite(std::vector<int64_t>{0}, std::vector<float>{2, 2}, stat,
                                          *moving_state));
  EXPECT_FALSE(moving.RowUpdatesStayFinite(std::vector<int64_t>{1},
                                           std::vector<float>{-3e38f, -3e38f}, stat,
                                           *moving_state));
  EXPECT_EQ(stat[2], 3e38f);
}

TEST(OptimizerRowsTest, MomentumRowsAreLazy) {
  OptimizerConfig c;
  c.set_name("sgd");
  c.set_learning_rate(0.1f);
  c.set_momentum(0.9f);
  auto opt = Optimizer::Create(c);
  ASSERT_TRUE(opt.ok());
  auto state = (*opt)->NewState(2);
  std::vector<float> w = {1, 1};
  (*opt)->ApplyRows(std::vector<int64_t>{0, 1}, std::vector<float>{0.5f, 0.5f},
                    absl::MakeSpan(w), state.get());
  (*opt)->ApplyRows(std::vector<int64_t>{0}, std::vector<float>{0.5f}, absl::MakeSpan(w),
                    state.get());
  EXPECT_NEAR(w[0], 0.855f, 1e-6);  // two momentum steps (SgdPlainMomentumNesterov)
  EXPECT_NEAR(w[1], 0.95f, 1e-6);   // one: its momentum did not carry it further
}

}  // namespace
}  // namespace pstrain
