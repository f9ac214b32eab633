#include "common/model/model_memory.h"

#include "common/memory_budget.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

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
  if (absurd != nullptr) {
    EXPECT_FALSE(CheckModelMemory(*absurd, use, "chief").ok());
  }
  SetMemoryBudgetForTesting(0);
}

// A worker that trains an Embedding by rows holds a batch's rows of its table, not the
// table: a 10M x 64 table (2.5 GB a copy) fits a budget that the whole table would not.
TEST(ModelMemoryTest, ARowSparseEmbeddingCountsTheRowsHeld) {
  const nlohmann::json keras = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "emb"},
        {"layers",
         {{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 8}}}}},
          {{"class_name", "Embedding"},
           {"config", {{"name", "embedding"}, {"input_dim", 10000000}, {"output_dim", 64}}}},
          {{"class_name", "GlobalAveragePooling1D"}, {"config", {{"name", "pool"}}}},
          {{"class_name", "Dense"},
           {"config", {{"name", "dense"}, {"units", 10}, {"activation", "softmax"}}}}}}}}};
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(keras, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  ModelMemoryUse use;
  use.copies_per_variable = 3;
  const int64_t dense = 64 * 10 + 10;
  EXPECT_EQ(ModelMemoryBytes(**model, use), (int64_t{10000000} * 64 + dense) * 3 * 4);
  use.first_layer_rows_held = 256 * 8;
  EXPECT_EQ(ModelMemoryBytes(**model, use), (int64_t{256} * 8 * 64 + dense) * 3 * 4);
  SetMemoryBudgetForTesting(int64_t{1} << 30);
  EXPECT_TRUE(CheckModelMemory(**model, use, "worker 0").ok());
  use.first_layer_rows_held = -1;
  EXPECT_EQ(CheckModelMemory(**model, use, "worker 0").code(),
            absl::StatusCode::kResourceExhausted);
  SetMemoryBudgetForTesting(0);
}

}  // namespace
}  // namespace pstrain
