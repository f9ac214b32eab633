#include "common/training/training_state.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

std::string TempRoot(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

constexpr char kJob[] = R"({"model": {"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 3]}},
  {"class_name": "Dense", "config": {"name": "dense", "units": 2}}]}},
  "compile": {"optimizer": "adam", "loss": "mse"}})";

Tensor Filled(std::vector<int64_t> shape, float start) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data()[i] = start + i;
  return t;
}

TrainingState AState() {
  TrainingState state;
  state.epochs_done = 2;
  state.global_step = 40;
  VariableSnapshot kernel;
  kernel.name = "dense/kernel";
  kernel.value = Filled({3, 2}, 1);
  kernel.iterations = 40;
  kernel.version = 38;
  kernel.slots = {{"momentum", Filled({3, 2}, 10)}, {"velocity", Filled({3, 2}, 20)}};
  VariableSnapshot bias;
  bias.name = "dense/bias";
  bias.value = Filled({2}, 5);
  bias.iterations = 40;
  bias.version = 40;
  bias.slots = {{"momentum", Filled({2}, 30)}, {"velocity", Filled({2}, 40)}};
  state.variables = {kernel, bias};
  return state;
}

std::unique_ptr<CheckpointReader> WriteAndOpen(const CheckpointContents& contents,
                                               const std::string& root) {
  CheckpointWriter writer(root, CheckpointWriter::Options());
  absl::StatusOr<std::string> path = writer.Write(contents);
  EXPECT_TRUE(path.ok()) << path.status();
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(root);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? *std::move(reader) : nullptr;
}

TEST(TrainingStateTest, RoundTripsThroughACheckpointInTheSharedLayout) {
  auto job = ParseJobSpec(kJob, "");
  ASSERT_TRUE(job.ok()) << job.status();
  const TrainingState state = AState();
  const CheckpointContents contents = CheckpointFromTrainingState(
      state, *job, {{"job_dir", "/jobs"}, {"global_step", -1}}, {{"dense/kernel", 2}});
  EXPECT_EQ(contents.step, 40);
  EXPECT_EQ(contents.epoch, 2);
  EXPECT_EQ((*contents.metadata)["job_dir"], "/jobs");
  EXPECT_EQ((*contents.metadata)["global_step"], 40);  // the layout's keys win
  EXPECT_EQ((*contents.metadata)["optimizer"], "adam");
  EXPECT_EQ((*contents.metadata)["variables"]["dense/kernel"]["num_shards"], 2);
  EXPECT_EQ((*contents.metadata)["variables"]["dense/bias"]["num_shards"], 1);
  EXPECT_EQ((*contents.metadata)["variables"]["dense/kernel"]["version"], 38);

  auto reader = WriteAndOpen(contents, TempRoot("layout"));
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(reader->Get("dense/kernel/optimizer/velocity").ok());
  auto back = TrainingStateFromCheckpoint(*reader);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->epochs_done, 2);
  EXPECT_EQ(back->global_step, 40);
  auto model = Model::FromKerasJson(job->model, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  auto ordered = VariablesForModel(*back, (*model)->variables(), "checkpoint x");
  ASSERT_TRUE(ordered.ok()) << ordered.status();
  ASSERT_EQ(ordered->size(), 2u);
  for (const VariableSnapshot& v : *ordered) {
    const VariableSnapshot& was = v.name == "dense/kernel" ? state.variables[0] : state.variables[1];
    EXPECT_EQ(v.value.values(), was.value.values()) << v.name;
    EXPECT_EQ(v.iterations, was.iterations);
    EXPECT_EQ(v.version, was.version);
    ASSERT_EQ(v.slots.size(), 2u);
    EXPECT_EQ(v.slots[1].name, "velocity");
    EXPECT_EQ(v.slots[1].tensor.values(), was.slots[1].tensor.values());
  }
}

TEST(TrainingStateTest, WithoutMetadataVariablesAndSlotsComeFromTheNames) {
  CheckpointContents contents;
  contents.step = 9;
  contents.tensors = {{"w", Filled({2}, 0)}, {"w/optimizer/momentum", Filled({2}, 3)}};
  auto reader = WriteAndOpen(contents, TempRoot("names"));
  ASSERT_NE(reader, nullptr);
  auto state = TrainingStateFromCheckpoint(*reader);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->variables.size(), 1u);
  EXPECT_EQ(state->variables[0].iterations, 9);
  ASSERT_EQ(state->variables[0].slots.size(), 1u);
  EXPECT_EQ(state->variables[0].slots[0].name, "momentum");
}

TEST(TrainingStateTest, AMissingListedTensorIsDataLoss) {
  CheckpointContents contents;
  *contents.metadata = {{"variables", {{"w", {{"slots", {"momentum"}}}}}}};
  contents.tensors = {{"w", Filled({2}, 0)}};
  auto reader = WriteAndOpen(contents, TempRoot("missing"));
  ASSERT_NE(reader, nullptr);
  auto state = TrainingStateFromCheckpoint(*reader);
  EXPECT_EQ(state.status().code(), absl::StatusCode::kDataLoss) << state.status();
  EXPECT_NE(state.status().message().find("w/optimizer/momentum"), std::string::npos);
}

TEST(TrainingStateTest, AStateThatDoesNotFitTheModelIsNamed) {
  const std::vector<VariableSpec> model = {{"dense/kernel", {3, 2}}, {"dense/bias", {2}}};
  TrainingState state = AState();
  EXPECT_TRUE(VariablesForModel(state, model, "s").ok());
  TrainingState missing = state;
  missing.variables.pop_back();
  auto result = VariablesForModel(missing, model, "checkpoint c");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), "checkpoint c does not fit the model: no variable dense/bias");
  TrainingState reshaped = state;
  reshaped.variables[0].value = Tensor({2, 3});
  result = VariablesForModel(reshaped, model, "s");
  EXPECT_NE(result.status().message().find("dense/kernel is [2,3] there, [3,2] in the model"),
            std::string::npos)
      << result.status();
  TrainingState odd_slot = state;
  odd_slot.variables[1].slots[0].tensor = Tensor({3});
  EXPECT_EQ(VariablesForModel(odd_slot, model, "s").status().code(),
            absl::StatusCode::kInvalidArgument);
  TrainingState negative = state;
  negative.global_step = -1;
  EXPECT_EQ(VariablesForModel(negative, model, "s").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
