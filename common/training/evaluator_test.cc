#include "common/training/evaluator.h"

#include <memory>

#include "common/math/cpu_backend.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// 3 features -> Dense(2, softmax); the first feature's sign decides the class.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 3]}},
  {"class_name": "Dense", "config": {"name": "out", "units": 2, "activation": "softmax"}}]}})";

class EvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = CreateCpuBackend();
    auto model = Model::FromKerasJsonText(kModel, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    ASSERT_TRUE(model_->SetLoss(LossConfig{}).ok());
    weights_ = model_->InitialValues(3);
    constexpr int kRows = 7;
    Tensor x({kRows, 3});
    Tensor y({kRows});
    for (int i = 0; i < kRows; ++i) {
      x.data()[3 * i] = i % 2 == 0 ? 1.0f + i : -1.0f - i;
      x.data()[3 * i + 1] = 0.1f * i;
      x.data()[3 * i + 2] = -0.2f * i;
      y.data()[i] = i % 2 == 0 ? 1.0f : 0.0f;
    }
    auto data = MakeDataset(x, y, 2);
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = std::make_unique<Dataset>(*std::move(data));
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<Tensor> weights_;
  std::unique_ptr<Dataset> data_;
};

TEST_F(EvaluatorTest, EveryBatchSizeGivesTheWholeDataSetsFigures) {
  auto whole = model_->Evaluate(weights_, data_->x, data_->y);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (int64_t batch : {1, 3, 7, 100}) {
    auto result = EvaluateOn(model_.get(), weights_, *data_, batch);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->samples, 7) << batch;
    EXPECT_NEAR(result->loss, whole->loss_sum / 7, 1e-6) << batch;
    EXPECT_DOUBLE_EQ(result->accuracy, static_cast<double>(whole->correct) / 7) << batch;
  }
}

TEST_F(EvaluatorTest, RefusesABadBatchSizeAndWeightsThatDoNotFit) {
  EXPECT_EQ(EvaluateOn(model_.get(), weights_, *data_, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<Tensor> wrong = weights_;
  wrong[0] = Tensor({5, 2});
  EXPECT_FALSE(EvaluateOn(model_.get(), wrong, *data_, 4).ok());
}

}  // namespace
}  // namespace pstrain
