#include "common/training/terminal_progress.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string Drawn(FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  return text;
}

TEST(TerminalProgressTest, DrawsABarWithAnEtaThenClearsItForTheEpochLine) {
  FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  TerminalProgress progress(out);
  StepsDone steps;
  steps.epoch = 1;
  steps.epochs = 2;
  steps.epoch_step = 25;
  steps.epoch_steps = 100;
  steps.epoch_elapsed = absl::Seconds(10);
  steps.epoch_loss = 0.5;
  steps.epoch_accuracy = 0.75;
  progress.OnSteps(steps);
  // A late chunk from behind is not drawn over the furthest point.
  steps.epoch_step = 10;
  progress.OnSteps(steps);
  progress.OnEpoch(EpochSummary());
  const std::string text = Drawn(out);
  EXPECT_THAT(text, HasSubstr("\r\033[K 25/100 [=======>"));
  EXPECT_THAT(text, HasSubstr("- ETA: 30s - loss: 0.5000 - accuracy: 0.7500"));
  EXPECT_EQ(text.find(" 10/100"), std::string::npos) << text;
  // Cleared at the epoch's end.
  EXPECT_TRUE(text.size() >= 4 && text.substr(text.size() - 4) == "\r\033[K") << text;
  std::fclose(out);
}

TEST(TerminalProgressTest, AnEpochOfUnknownLengthShowsStepsAndTimeAsKerasDoes) {
  FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  TerminalProgress progress(out);
  StepsDone steps;
  steps.epoch = 1;
  steps.epoch_step = 400;
  steps.epoch_elapsed = absl::Seconds(2);
  progress.OnSteps(steps);
  EXPECT_THAT(Drawn(out), HasSubstr("400/Unknown - 2s 5ms/step - loss: 0.0000"));
  std::fclose(out);
}

}  // namespace
}  // namespace pstrain
