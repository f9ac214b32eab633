// PsTrainer against real VariableStores through in-process clients: no network, but the
// real store, optimizer and model.

#include "worker/ps_trainer.h"

#include "common/math/cpu_backend.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_server/local_ps_client.h"
#include "ps_server/placement.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

// 4 inputs -> Dense(8, relu) -> Dense(3, softmax): small enough to learn in a few steps.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 8, "activation": "relu"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})";

class PsTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = CreateCpuBackend();
    auto model = Model::FromKerasJsonText(kModel, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    ASSERT_TRUE(model_->SetLoss(LossConfig{}).ok());
    std::vector<VariableShape> shapes;
    for (const VariableSpec& v : model_->trainable_variables()) shapes.push_back({v.name, v.shape});
    placement_ = *PlaceRoundRobin(shapes, 2);
    std::vector<Tensor> initial = model_->InitialValues(7);
    OptimizerConfig adam;
    adam.set_name("adam");
    adam.set_learning_rate(0.02f);
    std::vector<std::vector<NamedTensor>> per_ps(2);
    for (size_t i = 0; i < placement_.size(); ++i) {
      per_ps[placement_[i].ps_index()].push_back({placement_[i].name(), initial[i]});
    }
    for (int p = 0; p < 2; ++p) {
      ASSERT_TRUE(stores_[p].CreateVariables(per_ps[p], adam).ok());
      clients_.push_back(CreateLocalPsClient(p, &stores_[p]));
    }
  }

  std::vector<PsClient*> Clients() { return {clients_[0].get(), clients_[1].get()}; }

  // Class = index of the largest of the first three features.
  static void MakeBatch(int n, uint32_t seed, Tensor* x, Tensor* y) {
    *x = Tensor({n, 4});
    *y = Tensor({n});
    uint32_t state = seed;
    for (int i = 0; i < n; ++i) {
      int best = 0;
      for (int j = 0; j < 4; ++j) {
        state = state * 1664525u + 1013904223u;
        x->data()[i * 4 + j] = static_cast<float>(state >> 8) / (1 << 24);
        if (j < 3 && x->data()[i * 4 + j] > x->data()[i * 4 + best]) best = j;
      }
      y->data()[i] = static_cast<float>(best);
    }
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<VariablePlacementEntry> placement_;
  VariableStore stores_[2];
  std::vector<std::unique_ptr<PsClient>> clients_;
};

TEST_F(PsTrainerTest, StepsPushToEveryPsAndLowerTheLoss) {
  auto trainer = PsTrainer::Create(model_.get(), Clients(), placement_, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  Tensor x, y;
  MakeBatch(64, 3, &x, &y);
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    auto result = (*trainer)->Step(x, y);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->samples, 64);
    if (step == 0) first = result->loss_sum / 64;
    last = result->loss_sum / 64;
  }
  EXPECT_LT(last, 0.5 * first);
  // Every variable on both ps tasks was updated once per step.
  for (int p = 0; p < 2; ++p) {
    for (const auto& info : stores_[p].List()) EXPECT_EQ(info.version, 200) << info.name;
  }
}

TEST_F(PsTrainerTest, PlacementThatDoesNotFitTheModelIsRejected) {
  std::vector<VariablePlacementEntry> missing(placement_.begin(), placement_.end() - 1);
  EXPECT_EQ(PsTrainer::Create(model_.get(), Clients(), missing, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<VariablePlacementEntry> out_of_range = placement_;
  out_of_range[0].set_ps_index(5);
  EXPECT_EQ(PsTrainer::Create(model_.get(), Clients(), out_of_range, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<VariablePlacementEntry> wrong_shape = placement_;
  wrong_shape[0].set_shape(0, 99);
  EXPECT_EQ(PsTrainer::Create(model_.get(), Clients(), wrong_shape, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PsTrainerTest, BatchOfTheWrongWidthFailsWithoutTouchingThePs) {
  auto trainer = PsTrainer::Create(model_.get(), Clients(), placement_, 1);
  ASSERT_TRUE(trainer.ok());
  Tensor x({8, 5}), y({8});
  EXPECT_EQ((*trainer)->Step(x, y).status().code(), absl::StatusCode::kInvalidArgument);
  for (int p = 0; p < 2; ++p) EXPECT_EQ(stores_[p].num_pushes(), 0);
}

}  // namespace
}  // namespace pstrain
