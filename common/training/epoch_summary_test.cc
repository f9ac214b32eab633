#include "common/training/epoch_summary.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(FormatEpochLineTest, TrainingFiguresOnly) {
  EpochSummary s;
  s.epoch = 3;
  s.epochs = 10;
  s.loss = 2.28714;
  s.accuracy = 0.142;
  EXPECT_EQ(FormatEpochLine(s), "Epoch 3/10 - loss: 2.2871 - accuracy: 0.1420");
}

TEST(FormatEpochLineTest, ValidationFiguresFollowTheTrainingOnes) {
  EpochSummary s;
  s.epoch = 1;
  s.epochs = 2;
  s.loss = 0.5;
  s.accuracy = 0.8;
  s.has_validation = true;
  s.val_loss = 0.61234;
  s.val_accuracy = 0.79996;
  EXPECT_EQ(FormatEpochLine(s),
            "Epoch 1/2 - loss: 0.5000 - accuracy: 0.8000 - val_loss: 0.6123 - val_accuracy: "
            "0.8000");
}

TEST(FormatEpochLineTest, StepsAddKerasTiming) {
  EpochSummary s;
  s.epoch = 1;
  s.epochs = 10;
  s.steps = 938;
  s.elapsed = absl::Milliseconds(2400);
  s.loss = 0.43;
  s.accuracy = 0.85;
  EXPECT_EQ(FormatEpochLine(s),
            "Epoch 1/10 - 938/938 - 2s 3ms/step - loss: 0.4300 - accuracy: 0.8500");
}

TEST(KerasFormatTest, TimePerUnitPicksSecondsMillisecondsOrMicroseconds) {
  EXPECT_EQ(FormatTimePerUnit(absl::Milliseconds(2500), "step"), "2s/step");
  EXPECT_EQ(FormatTimePerUnit(absl::Milliseconds(12), "step"), "12ms/step");
  EXPECT_EQ(FormatTimePerUnit(absl::Microseconds(350), "step"), "350us/step");
  EXPECT_EQ(FormatTimePerUnit(absl::ZeroDuration(), "step"), "0s/step");
}

TEST(KerasFormatTest, EtaInSecondsMinutesOrHours) {
  EXPECT_EQ(FormatEta(absl::Seconds(45)), "45s");
  EXPECT_EQ(FormatEta(absl::Seconds(187)), "3:07");
  EXPECT_EQ(FormatEta(absl::Seconds(3723)), "1:02:03");
  EXPECT_EQ(FormatEta(absl::Seconds(-3)), "0s");
}

TEST(KerasFormatTest, ProgressBarShowsEtaThenTheEpochsTiming) {
  // A quarter done in 10 s: 30 s to go.
  EXPECT_EQ(FormatProgressBar(25, 100, absl::Seconds(10), 0.5, 0.75),
            " 25/100 [=======>......................] - ETA: 30s - loss: 0.5000 - accuracy: "
            "0.7500");
  EXPECT_EQ(FormatProgressBar(100, 100, absl::Seconds(2), 0.5, 0.75),
            "100/100 [==============================] - 2s 20ms/step - loss: 0.5000 - accuracy: "
            "0.7500");
}

}  // namespace
}  // namespace pstrain
