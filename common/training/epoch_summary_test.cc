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

}  // namespace
}  // namespace pstrain
