#include "common/tensorboard/tensorboard_observer.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/tensorboard/event.pb.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Every scalar (step, tag, value) in the one event file of `dir`, TFRecord framing skipped
// (event_file_writer_test checks it).
std::vector<std::tuple<int64_t, std::string, float>> Scalars(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  std::string file;
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind("events.out.tfevents.", 0) == 0) file = dir + "/" + e->d_name;
  }
  closedir(d);
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  std::vector<std::tuple<int64_t, std::string, float>> out;
  for (size_t at = 0; at + 12 <= bytes.size();) {
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[at + i]);
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromString(bytes.substr(at + 12, length)));
    for (const auto& v : event.summary().value()) out.emplace_back(event.step(), v.tag(), v.simple_value());
    at += 16 + length;
  }
  return out;
}

TEST(TensorBoardObserverTest, EpochsAndEveryNStepsGoToKerasTags) {
  char dir_template[] = "/tmp/tb_observer_test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string logdir = dir_template;
  absl::StatusOr<std::unique_ptr<TrainingEventLog>> log = TrainingEventLog::Create(logdir);
  ASSERT_TRUE(log.ok()) << log.status();
  {
    TensorBoardObserver observer(*std::move(log), /*log_every_steps=*/10, /*learning_rate=*/0.01);
    StepsDone steps;
    steps.samples = 64;
    for (int64_t step = 1; step <= 25; ++step) {
      steps.global_step = step;
      steps.loss = 1.0 / step;
      observer.OnSteps(steps);
    }
    EpochSummary epoch;
    epoch.epoch = 1;
    epoch.loss = 0.25;
    epoch.accuracy = 0.5;
    epoch.has_validation = true;
    epoch.val_loss = 0.375;
    epoch.val_accuracy = 0.625;
    observer.OnEpoch(epoch);
  }
  const auto train = Scalars(logdir + "/train");
  const auto validation = Scalars(logdir + "/validation");
  // Steps 10 and 20: loss, samples per second, learning rate; then the epoch (step 0).
  ASSERT_EQ(train.size(), 9u);
  EXPECT_EQ(train[0], std::make_tuple(int64_t{10}, std::string("batch_loss"), 0.1f));
  EXPECT_EQ(std::get<1>(train[1]), "batch_samples_per_second");
  EXPECT_GT(std::get<2>(train[1]), 0.0f);
  EXPECT_EQ(train[2], std::make_tuple(int64_t{10}, std::string("batch_learning_rate"), 0.01f));
  EXPECT_EQ(train[3], std::make_tuple(int64_t{20}, std::string("batch_loss"), 0.05f));
  EXPECT_EQ(train[6], std::make_tuple(int64_t{0}, std::string("epoch_loss"), 0.25f));
  EXPECT_EQ(train[7], std::make_tuple(int64_t{0}, std::string("epoch_accuracy"), 0.5f));
  EXPECT_EQ(train[8], std::make_tuple(int64_t{0}, std::string("epoch_learning_rate"), 0.01f));
  ASSERT_EQ(validation.size(), 2u);
  EXPECT_EQ(validation[0], std::make_tuple(int64_t{0}, std::string("epoch_loss"), 0.375f));
  EXPECT_EQ(validation[1], std::make_tuple(int64_t{0}, std::string("epoch_accuracy"), 0.625f));
  std::system(("rm -rf " + logdir).c_str());
}

}  // namespace
}  // namespace pstrain
