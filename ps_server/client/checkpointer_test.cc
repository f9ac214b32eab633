// The Checkpointer against real VariableStores (in-process clients) and real files.

#include "ps_server/client/checkpointer.h"

#include <cstdlib>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/math/cpu_backend.h"
#include "common/memory_budget.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

constexpr char kJob[] = R"({"model": {"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}},
  "compile": {"optimizer": "adam", "loss": "mse"}})";

std::string TempRoot(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

// A job, its model and its variables split over two in-process ps tasks.
class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = *ParseJobSpec(kJob, "");
    backend_ = CreateCpuBackend();
    model_ = *Model::FromKerasJson(job_.model, backend_.get());
    for (int p = 0; p < 2; ++p) clients_.push_back(CreateLocalPsClient(p, &stores_[p]));
    variables_ = std::make_unique<ShardedVariables>(
        model_.get(), std::vector<PsClient*>{clients_[0].get(), clients_[1].get()},
        job_.optimizer, ConsistencyConfig());
    PlacementPolicy split;
    split.num_shards = 2;
    ASSERT_TRUE(variables_->Create(split, 3).ok());
  }

  Checkpointer::Options OptionsIn(const std::string& name) {
    Checkpointer::Options options;
    options.dir = TempRoot(name);
    *options.metadata = {{"job_dir", "/jobs"}};
    return options;
  }

  JobSpec job_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  VariableStore stores_[2];
  std::vector<std::unique_ptr<PsClient>> clients_;
  std::unique_ptr<ShardedVariables> variables_;
};

TEST_F(CheckpointerTest, TriggersFireByStepsAndByRequest) {
  Checkpointer::Options options = OptionsIn("triggers");
  options.every_steps = 10;
  Checkpointer checkpointer(options, &job_, variables_.get());
  checkpointer.Start(100);
  EXPECT_FALSE(checkpointer.Due(109));
  EXPECT_TRUE(checkpointer.Due(110));
  ASSERT_TRUE(checkpointer.Write(0, 110, nullptr).ok());
  EXPECT_FALSE(checkpointer.Due(111));
  checkpointer.Request();
  EXPECT_TRUE(checkpointer.Requested());
  EXPECT_TRUE(checkpointer.Due(111));
  ASSERT_TRUE(checkpointer.Write(0, 111, nullptr).ok());
  EXPECT_FALSE(checkpointer.Requested());  // served

  Checkpointer none(Checkpointer::Options(), &job_, variables_.get());
  none.Request();
  EXPECT_FALSE(none.enabled());
  EXPECT_FALSE(none.Due(1000));
  EXPECT_EQ(none.Write(1, 1, nullptr).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CheckpointerTest, WritesTheSharedLayoutAndRestoresIt) {
  Checkpointer checkpointer(OptionsIn("layout"), &job_, variables_.get());
  auto before = variables_->Pull();
  ASSERT_TRUE(before.ok());
  const nlohmann::json position = {{"epoch", 2}, {"steps", 7}};
  ASSERT_TRUE(checkpointer.Write(2, 57, &position).ok());
  const SaveCheckpointResponse last = checkpointer.last();
  EXPECT_EQ(last.step(), 57);
  EXPECT_EQ(last.epoch(), 2);
  auto reader = checkpointer.OpenLatest();
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->path(), last.path());
  const nlohmann::json& metadata = (*reader)->metadata();
  EXPECT_EQ(metadata["job_dir"], "/jobs");
  EXPECT_EQ(metadata["num_ps"], 2);
  EXPECT_EQ(metadata["data_position"]["steps"], 7);
  EXPECT_EQ(metadata["variables"]["out/kernel"]["num_shards"], 2);
  EXPECT_EQ(metadata["variables"]["out/kernel"]["slots"],
            nlohmann::json::array({"momentum", "velocity"}));
  ASSERT_TRUE((*reader)->Get("out/kernel/optimizer/velocity").ok());

  // Change the ps, then restore: the checkpoint's values come back.
  TrainingState zeros;
  auto states = variables_->ReadStates();
  ASSERT_TRUE(states.ok());
  zeros.variables = *states;
  for (VariableSnapshot& v : zeros.variables) {
    for (float& x : v.value.values()) x = 0.0f;
  }
  ASSERT_TRUE(variables_->Restore(zeros, "zeros").ok());
  ASSERT_TRUE(checkpointer.Restore(**reader).ok());
  auto after = variables_->Pull();
  ASSERT_TRUE(after.ok());
  for (size_t i = 0; i < before->size(); ++i) EXPECT_EQ(Values((*after)[i]), Values((*before)[i]));
}

// A format-1 checkpoint (these ps have no folder of their own) passes every variable
// and its slots through this process: over --max_memory it is refused before anything
// is read or written, and the budget back, the next one is written.
TEST_F(CheckpointerTest, AFormatOneCheckpointOverTheMemoryBudgetIsRefused) {
  Checkpointer checkpointer(OptionsIn("over_budget"), &job_, variables_.get());
  SetMemoryBudgetForTesting(64);  // out/kernel alone is 12 floats, with Adam's 2 slots 144 B
  const absl::Status refused = checkpointer.Write(1, 10, nullptr);
  SetMemoryBudgetForTesting(0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("--max_memory"), std::string::npos) << refused;
  EXPECT_FALSE(checkpointer.OpenLatest().ok());
  ASSERT_TRUE(checkpointer.Write(1, 10, nullptr).ok());
  EXPECT_TRUE(checkpointer.OpenLatest().ok());
}

TEST_F(CheckpointerTest, AwaitWriteAnswersTheWriteTheJobsEndOrTheDeadline) {
  Checkpointer checkpointer(OptionsIn("await"), &job_, variables_.get());
  int64_t ticket = checkpointer.Request();
  auto late = checkpointer.AwaitWrite(ticket, absl::Milliseconds(20));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  std::thread writer([&] { EXPECT_TRUE(checkpointer.Write(1, 5, nullptr).ok()); });
  auto written = checkpointer.AwaitWrite(ticket, absl::Seconds(30));
  writer.join();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->step(), 5);
  ticket = checkpointer.Request();
  checkpointer.EndJob(/*failed=*/true);
  auto failed = checkpointer.AwaitWrite(ticket, absl::Seconds(30));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(failed.status().message().find("failed"), std::string::npos) << failed.status();
}

}  // namespace
}  // namespace pstrain
