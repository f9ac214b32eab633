#include "common/training/training_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

TEST(TrainingMetricsTest, EpochFiguresCheckpointsAndLostTasksBecomeMetrics) {
  MetricsRegistry registry;
  TrainingMetrics metrics(&registry);
  StepsDone steps;
  steps.epoch = 2;
  steps.global_step = 400;
  steps.samples = 6400;
  metrics.OnSteps(steps);
  steps.global_step = 300;  // an earlier chunk answering late does not move the step back
  metrics.OnSteps(steps);
  EpochSummary epoch;
  epoch.epoch = 2;
  epoch.loss = 0.4321;
  epoch.accuracy = 0.85;
  epoch.has_validation = true;
  epoch.val_loss = 0.5;
  epoch.val_accuracy = 0.8125;
  metrics.OnEpoch(epoch);
  CheckpointEvent written;
  written.took = absl::Milliseconds(300);
  metrics.OnCheckpoint(written);
  CheckpointEvent failed;
  failed.ok = false;
  metrics.OnCheckpoint(failed);
  metrics.OnTaskLost("worker", "worker 1 (localhost:2)");
  metrics.OnPsRecovered();

  const std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("\npstrain_training_epoch 2\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_training_global_step 400\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_training_samples_total 12800\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_training_loss 0.4321\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_training_validation_accuracy 0.8125\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_training_checkpoints_written_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_training_checkpoint_failures_total 1\n"));
  EXPECT_THAT(text,
              HasSubstr("pstrain_training_checkpoint_write_duration_seconds_bucket{le=\"0.5\"} 1"));
  EXPECT_THAT(text, HasSubstr("pstrain_chief_tasks_lost_total{task_type=\"worker\"} 1"));
  EXPECT_THAT(text, HasSubstr("\npstrain_chief_ps_recoveries_total 1\n"));
}

TEST(TrainingMetricsTest, SamplesPerSecondIsMeasuredOverAtLeastASecond) {
  MetricsRegistry registry;
  TrainingMetrics metrics(&registry);
  StepsDone steps;
  steps.samples = 1000;
  metrics.OnSteps(steps);  // starts the clock
  absl::SleepFor(absl::Milliseconds(1100));
  metrics.OnSteps(steps);
  const std::string text = registry.TextFormat();
  const size_t at = text.find("\npstrain_training_samples_per_second ");
  ASSERT_NE(at, std::string::npos);
  const double rate = std::stod(text.substr(at + 37));
  EXPECT_GT(rate, 100);    // 1000 samples in a bit more than 1.1 s
  EXPECT_LT(rate, 1000);
}

}  // namespace
}  // namespace pstrain
