#include "common/model/model_memory.h"

#include "common/memory_budget.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::unique_ptr<Model> Mlp(int64_t hidden) {
  const nlohmann::json keras = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "mlp"},
        {"layers",
         {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 784}}}}},
          {{"class_name", "Dense"},
           {"config", {{"name", "dense"}, {"units", hidden}, {"activation", "relu"}}}},
          {{"class_name", "Dropout"}, {"config", {{"name", "dropout"}, {"rate", 0.2}}}},
          {{"class_name", "Dense"},
           {"config", {{"name", "dense_1"}, {"units", 10}, {"activation", "softmax"}}}}}}}}};
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(keras, nullptr);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

TEST(ModelMemoryTest, CountsVariablesTimesCopiesAndActivationsPerExample) {
  std::unique_ptr<Model> model = Mlp(64);
  ASSERT_NE(model, nullptr);
  ModelMemoryUse variables_only;
  variables_only.copies_per_variable = 3;
  const int64_t parameters = 784 * 64 + 64 + 64 * 10 + 10;
  EXPECT_EQ(ModelMemoryBytes(*model, variables_only), parameters * 3 * 4);
  ModelMemoryUse with_batch = variables_only;
  with_batch.batch = 32;
  with_batch.replicas = 2;
  // Per example: dense (2*64 + 784), dropout (2*64 + 64), dense_1 (2*10 + 64).
  const int64_t activations = (2 * 64 + 784) + (2 * 64 + 64) + (2 * 10 + 64);
  EXPECT_EQ(ModelMemoryBytes(*model, with_batch), (parameters * 3 + activations * 32 * 2) * 4);
}

// A Dense with 3e8 units aborted with std::bad_alloc (the chief only once every task
// had registered); it is refused before anything is allocated, naming the layer.
TEST(ModelMemoryTest, AModelOverTheBudgetIsRefusedNamingItsLargestLayer) {
  std::unique_ptr<Model> huge = Mlp(300000000);
  ASSERT_NE(huge, nullptr);
  SetMemoryBudgetForTesting(int64_t{16} << 30);
  ModelMemoryUse use;
  use.copies_per_variable = 4;
  use.copies_are = "value, gradient and 2 optimizer slots";
  use.batch = 32;
  absl::Status status = CheckModelMemory(*huge, use, "worker 0");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("worker 0: model mlp (value, gradient and 2 optimizer slots; "
                                  "activations for a batch of 32) needs "),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("more than the memory budget of 16.0 GiB (--max_memory); its "
                                  "largest layer, dense (Dense), needs "),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("kernel [784,300000000], bias [300000000]"), std::string::npos)
      << status;
  EXPECT_TRUE(CheckModelMemory(*Mlp(64), use, "worker 0").ok());
  // So large that every size saturates: still refused, never wrapped to a small size.
  std::unique_ptr<Model> absurd = Mlp(int64_t{1} << 60);
  if (absurd != nullptr) EXPECT_FALSE(CheckModelMemory(*absurd, use, "chief").ok());
  SetMemoryBudgetForTesting(0);
}

}  // namespace
}  // namespace pstrain
