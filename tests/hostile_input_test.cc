// Bad input given to the real binaries (train/train, chief/chief) as a user would: each
// is refused with one line naming what is wrong and a non-zero exit, before any training;
// a corrupt checkpoint is skipped for the previous good one; a learning rate far too high
// fails the job naming the non-finite gradient, or is skipped and counted.

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deploy/local/free_port.h"
#include "deploy/local/process_group.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

json TinyJob() {
  std::ifstream in("tests/testdata/tiny_synthetic.json");
  json job = json::parse(in);
  job["fit"]["epochs"] = 2;
  return job;
}

std::string WriteJob(const std::string& dir, const std::string& name, const json& job) {
  const std::string path = absl::StrCat(dir, "/", name);
  std::ofstream(path) << job.dump();
  return path;
}

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Outcome RunBinary(const std::string& name, const std::string& binary,
            const std::vector<std::string>& args,
            const std::map<std::string, std::string>& env = {}) {
  ProcessGroup group;
  std::map<std::string, std::string> full_env = env;
  full_env["OPENBLAS_NUM_THREADS"] = "1";
  EXPECT_TRUE(group.Start({name, binary, args, full_env}).ok());
  ProcessRun run = CollectRun(group, absl::Minutes(2), absl::Seconds(5));
  Outcome outcome;
  if (!run.exits.empty()) outcome.exit_code = run.exits[0].exit_code;
  outcome.out = run.stdout_of[name];
  outcome.err = run.stderr_of[name];
  return outcome;
}

Outcome Train(const std::vector<std::string>& args) { return RunBinary("train", "train/train", args); }

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  std::string dir_;
};

TEST_F(HostileInputTest, ValuesThatWouldBeDefaultedOrIgnoredAreRefusedAtStart) {
  json zero_lr = TinyJob();
  zero_lr["compile"]["optimizer"]["config"]["learning_rate"] = 0;
  Outcome lr = Train({"--job=" + WriteJob(dir_, "lr0.json", zero_lr)});
  EXPECT_EQ(lr.exit_code, 2) << lr.err;
  EXPECT_THAT(lr.err, HasSubstr("learning_rate 0 is out of range"));
  EXPECT_THAT(lr.out, Not(HasSubstr("Epoch 1/")));

  json quantum = TinyJob();
  quantum["strategy"] = "quantum";
  Outcome strategy = Train({"--job=" + WriteJob(dir_, "quantum.json", quantum)});
  EXPECT_EQ(strategy.exit_code, 2) << strategy.err;
  EXPECT_THAT(strategy.err, HasSubstr("strategy \"quantum\" is not one of default, mirrored"));

  Outcome memory = Train({"--job=tests/testdata/tiny_synthetic.json", "--max_memory=lots"});
  EXPECT_NE(memory.exit_code, 0);
  EXPECT_THAT(memory.err, HasSubstr("memory size \"lots\""));
}

TEST_F(HostileInputTest, NonFiniteAndNonRegularDataFilesAreRefusedNamingTheLine) {
  std::string csv = "f0,f1,f2,f3,label\n";
  for (int i = 0; i < 20; ++i) absl::StrAppend(&csv, i, ",1,2,3,", i % 3, "\n");
  csv.replace(csv.find("7,1,2,3"), 7, "7,1,nan,3");  // data row 8: line 9
  std::ofstream(dir_ + "/data.csv") << csv;
  json job = TinyJob();
  job["model"]["config"]["layers"][0]["config"]["batch_input_shape"] = {nullptr, 4};
  job["data"]["train"] = {{"type", "csv"}, {"path", dir_ + "/data.csv"}};
  Outcome nan = Train({"--job=" + WriteJob(dir_, "csv.json", job)});
  EXPECT_EQ(nan.exit_code, 2) << nan.err;
  EXPECT_THAT(nan.err, HasSubstr(dir_ + "/data.csv: line 9 column 3: \"nan\" is not a finite number"));

  job["data"]["train"]["path"] = "/dev/zero";
  Outcome zero = Train({"--job=" + WriteJob(dir_, "zero.json", job)});
  EXPECT_EQ(zero.exit_code, 2) << zero.err;
  EXPECT_THAT(zero.err, HasSubstr("/dev/zero is not a regular file"));
}

// learning_rate 1e30 trained to "loss: -nan" and exited 0.
TEST_F(HostileInputTest, ALearningRateFarTooHighFailsOnTheNonFiniteGradientOrIsSkipped) {
  json job = TinyJob();
  job["compile"]["optimizer"] = {{"class_name", "SGD"}, {"config", {{"learning_rate", 1e30}}}};
  Outcome failed = Train({"--job=" + WriteJob(dir_, "hot.json", job)});
  EXPECT_EQ(failed.exit_code, 2) << failed.err;
  EXPECT_THAT(failed.err, HasSubstr("holds a non-finite value"));
  EXPECT_THAT(failed.out, Not(HasSubstr("nan")));

  job["nonfinite"] = "skip";
  Outcome skipped = Train({"--job=" + WriteJob(dir_, "skip.json", job)});
  EXPECT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_THAT(skipped.err, HasSubstr("steps had a non-finite gradient and were skipped"));
}

TEST_F(HostileInputTest, AnUnwritableCheckpointDirectoryFailsBeforeTheFirstEpoch) {
  std::ofstream(dir_ + "/file") << "not a directory";
  Outcome run = Train({"--job=tests/testdata/tiny_synthetic.json",
                       "--checkpoint_dir=" + dir_ + "/file/checkpoints"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr(dir_ + "/file/checkpoints"));
  EXPECT_THAT(run.out, Not(HasSubstr("Epoch 1/")));
}

// A manifest whose offset + length passes 2^63 - 1 segfaulted train at every start: it
// is reported and the previous good checkpoint used.
TEST_F(HostileInputTest, AnOverflowingCheckpointManifestFallsBackToThePreviousOne) {
  const std::string checkpoints = dir_ + "/checkpoints";
  Outcome first = Train({"--job=tests/testdata/tiny_synthetic.json", "--epochs=2",
                         "--checkpoint_dir=" + checkpoints});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::ifstream latest_file(checkpoints + "/latest");
  std::string latest;
  latest_file >> latest;
  const std::string manifest_path = checkpoints + "/" + latest + "/manifest.json";
  json manifest = json::parse(std::ifstream(manifest_path));
  manifest["tensors"][0]["offset"] = int64_t{9223372036854775000};
  std::ofstream(manifest_path, std::ios::trunc) << manifest.dump();

  Outcome resumed = Train({"--job=tests/testdata/tiny_synthetic.json", "--epochs=3",
                           "--checkpoint_dir=" + checkpoints});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr("using the previous good checkpoint"));
  // The epoch-1 checkpoint was used: epochs 2 and 3 run again.
  EXPECT_THAT(resumed.out, HasSubstr("Epoch 2/3"));
}

// A Dense with 3e8 units aborted the chief with std::bad_alloc once every task had
// registered (taking the ps and workers down): it fails at start, before waiting.
TEST_F(HostileInputTest, AModelTooLargeForMemoryFailsTheChiefBeforeItWaitsForTasks) {
  json job = TinyJob();
  job["model"]["config"]["layers"][1]["config"]["units"] = 300000000;
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(3);
  ASSERT_TRUE(ports.ok());
  const json tf_config = {
      {"cluster",
       {{"chief", {absl::StrCat("127.0.0.1:", (*ports)[0])}},
        {"ps", {absl::StrCat("127.0.0.1:", (*ports)[1])}},
        {"worker", {absl::StrCat("127.0.0.1:", (*ports)[2])}}}},
      {"task", {{"type", "chief"}, {"index", 0}}}};
  // No ps or worker ever starts, and the chief would wait for them for 10 minutes.
  Outcome chief = RunBinary("chief", "chief/chief",
                      {"--job=" + WriteJob(dir_, "wide.json", job), "--register_timeout=10m",
                       "--max_memory=8G"},
                      {{"TF_CONFIG", tf_config.dump()}});
  EXPECT_EQ(chief.exit_code, 2) << chief.err;
  // The chief holds the dense variables and one validation batch's activations (it no
  // longer gathers a table): the largest of those names the 3e8-wide layer's shape.
  EXPECT_THAT(chief.err, HasSubstr("more than the memory budget of 8.0 GiB"));
  EXPECT_THAT(chief.err, HasSubstr("its largest layer, "));
  EXPECT_THAT(chief.err, HasSubstr("[300000000]"));
  EXPECT_THAT(chief.err, HasSubstr("--max_memory"));
}

}  // namespace
}  // namespace pstrain
