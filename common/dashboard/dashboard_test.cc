#include "common/dashboard/dashboard.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

StepsDone Steps(int64_t global_step, int worker, int64_t steps, double loss) {
  StepsDone s;
  s.epoch = 1;
  s.epochs = 3;
  s.global_step = global_step;
  s.steps = steps;
  s.samples = steps * 32;
  s.loss = loss;
  s.worker = worker;
  return s;
}

TEST(DashboardTest, DataHoldsEpochsStepsCheckpointsTasksAndStaleness) {
  Dashboard dashboard({"pstrain chief", [] {
                         return nlohmann::json{
                             {"phase", "training"},
                             {"tasks", {{{"role", "worker"}, {"index", 0}, {"state", "up"}}}}};
                       }});
  dashboard.OnSteps(Steps(100, 0, 100, 0.9));  // starts the clock: no point yet
  absl::SleepFor(absl::Milliseconds(260));
  dashboard.OnSteps(Steps(200, 1, 100, 0.7));
  absl::SleepFor(absl::Milliseconds(260));
  dashboard.OnSteps(Steps(300, 0, 100, 0.6));
  EpochSummary epoch;
  epoch.epoch = 1;
  epoch.epochs = 3;
  epoch.loss = 0.65;
  epoch.accuracy = 0.8;
  epoch.has_validation = true;
  epoch.val_loss = 0.7;
  epoch.val_accuracy = 0.78;
  epoch.steps = 300;
  dashboard.OnEpoch(epoch);
  CheckpointEvent checkpoint;
  checkpoint.path = "/tmp/c/ckpt-300";
  checkpoint.step = 300;
  checkpoint.epoch = 1;
  dashboard.OnCheckpoint(checkpoint);

  const nlohmann::json data = dashboard.Data();
  EXPECT_EQ(data["title"], "pstrain chief");
  EXPECT_EQ(data["global_step"], 300);
  EXPECT_EQ(data["epochs"], 3);
  ASSERT_EQ(data["epochs_history"].size(), 1u);
  EXPECT_DOUBLE_EQ(data["epochs_history"][0]["val_accuracy"].get<double>(), 0.78);
  ASSERT_EQ(data["steps"].size(), 2u);
  EXPECT_EQ(data["steps"][0][0], 200);
  EXPECT_DOUBLE_EQ(data["steps"][1][1].get<double>(), 0.6);
  // 100 steps of 32 samples in about 0.26 s.
  EXPECT_GT(data["steps"][1][2].get<double>(), 1000);
  EXPECT_LT(data["steps"][1][2].get<double>(), 3200 / 0.25);
  // The window that rate was measured over: the rate times it is the window's samples.
  ASSERT_EQ(data["steps"][1].size(), 4u);
  EXPECT_GE(data["steps"][1][3].get<double>(), 0.25);
  EXPECT_NEAR(data["steps"][1][2].get<double>() * data["steps"][1][3].get<double>(), 3200, 1e-6);
  EXPECT_EQ(data["checkpoints"][0]["path"], "/tmp/c/ckpt-300");
  EXPECT_EQ(data["workers"]["0"]["steps"], 200);
  EXPECT_EQ(data["workers"]["1"]["behind"], 100);
  EXPECT_EQ(data["status"]["phase"], "training");
}

TEST(DashboardTest, ServesThePageAndItsDataAndNothingElse) {
  Dashboard dashboard({"t", nullptr});
  std::optional<HttpPage> page = dashboard.Handle("/", "");
  ASSERT_TRUE(page.has_value());
  EXPECT_THAT(page->content_type, HasSubstr("text/html"));
  EXPECT_THAT(page->body, HasSubstr("<canvas id=\"loss-epoch\">"));
  // The chart rules are inlined: the page fetches no script.
  EXPECT_THAT(page->body, HasSubstr("function epochTicks("));
  EXPECT_EQ(page->body.find("<script src="), std::string::npos);
  // Nothing is fetched from elsewhere: no absolute URL in the page.
  EXPECT_EQ(page->body.find("http://"), std::string::npos);
  EXPECT_EQ(page->body.find("https://"), std::string::npos);
  std::optional<HttpPage> data = dashboard.Handle("/api/dashboard", "");
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(data->body)["title"], "t");
  EXPECT_FALSE(dashboard.Handle("/etc/passwd", "").has_value());
}

}  // namespace
}  // namespace pstrain
