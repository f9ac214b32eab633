// A Keras 3 .keras file round trip on the real Fashion-MNIST, as real processes: a job
// trains and checkpoints; tools/export_keras writes the .keras (checked by Python's
// zipfile and h5py, tools/testdata/check_keras_file.py); a job whose "model" is that file
// (and no "compile": the file's compile_config is used, as load_model compiles) evaluates
// exactly as the checkpoint does, and continues training from its weights under default,
// mirrored and parameter_server: its first epoch's loss is below a fresh start's. At the
// end, train and the chief write the trained model with --export_keras (the chief from
// the ps tasks' weights), equal to their last checkpoint's. The CNN example, with
// BatchNormalization's moving statistics, round-trips the same way.

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

const std::map<std::string, std::string> kOneBlasThread = {{"OPENBLAS_NUM_THREADS", "1"}};

bool HaveFashionMnist() {
  struct stat st;
  return stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", &st) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The newest checkpoint under `root`, as its "latest" file names it.
std::string LatestCheckpoint(const std::string& root) {
  std::string name = ReadFile(root + "/latest");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return root + "/" + name;
}

// Runs one process to its end; its stdout, or a test failure with its stderr.
std::string RunToEnd(const std::string& binary, const std::vector<std::string>& args) {
  ProcessGroup group;
  EXPECT_TRUE(group.Start({"p", binary, args, kOneBlasThread}).ok());
  ProcessRun run = CollectRun(group, absl::Minutes(5), absl::Seconds(10));
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << binary << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of["p"];
  }
  return run.stdout_of["p"];
}

// "...: test loss: 0.4082 - test accuracy: 0.8552 - 10000 examples" -> what follows ": test".
std::string Figures(const std::string& evaluated) {
  const size_t at = evaluated.find(": test loss");
  return at == std::string::npos ? "(none in: " + evaluated + ")" : evaluated.substr(at + 2);
}

TEST(KerasRoundTripTest, AnExportedModelEvaluatesTheSameAndTrainingContinuesFromIt) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string checkpoints = dir + "/ckpt";
  const std::string fresh = RunToEnd(
      "train/train", {"--job=examples/fashion_mnist.json", "--epochs=2",
                       "--checkpoint_dir=" + checkpoints});
  const std::vector<double> fresh_losses = ParseEpochLosses(fresh);
  ASSERT_EQ(fresh_losses.size(), 2u) << fresh;

  const std::string keras = dir + "/model.keras";
  RunToEnd("tools/export_keras", {"--checkpoint=" + checkpoints, "--out=" + keras});
  const std::string checked = RunToEnd(
      "/usr/bin/python3",
      {"tools/testdata/check_keras_file.py", keras, LatestCheckpoint(checkpoints)});
  EXPECT_NE(checked.find("ok: 3 layers, 4 tensors equal to the checkpoint's"), std::string::npos)
      << checked;

  // The same job with the .keras file as its model, and no compile section.
  nlohmann::json job = nlohmann::json::parse(ReadFile("examples/fashion_mnist.json"));
  job["model"] = keras;
  job.erase("compile");
  const std::string job_path = dir + "/from_keras.json";
  std::ofstream(job_path) << job.dump(2);

  const std::string from_checkpoint =
      RunToEnd("tools/evaluate", {"--checkpoint=" + checkpoints});
  const std::string from_keras = RunToEnd("tools/evaluate", {"--job=" + job_path});
  EXPECT_EQ(Figures(from_keras), Figures(from_checkpoint)) << from_keras << from_checkpoint;

  // Training continues from the file's weights: the first epoch starts where the fresh
  // run ended, so its loss is below the fresh run's first epoch (0.60 against 0.40 here).
  const std::string continued_default = RunToEnd(
      "train/train", {"--job=" + job_path, "--epochs=1", "--checkpoint_dir=" + dir + "/default",
                       "--export_keras=" + dir + "/default.keras"});
  const std::string continued_mirrored = RunToEnd(
      "train/train",
      {"--job=" + job_path, "--epochs=1", "--strategy=mirrored", "--devices=cpu:0,cpu:1"});
  for (const std::string* out : {&continued_default, &continued_mirrored}) {
    const std::vector<double> losses = ParseEpochLosses(*out);
    ASSERT_EQ(losses.size(), 1u) << *out;
    EXPECT_LT(losses[0], fresh_losses[0] - 0.1) << *out << fresh;
  }
  const std::string default_checked =
      RunToEnd("/usr/bin/python3", {"tools/testdata/check_keras_file.py", dir + "/default.keras",
                                    LatestCheckpoint(dir + "/default")});
  EXPECT_NE(default_checked.find("ok: 3 layers, 4 tensors"), std::string::npos)
      << default_checked;

  // parameter_server: the chief creates the ps variables from the file's weights.
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.num_ps = 1;
  options.num_workers = 1;
  options.chief_args = {"--job=" + job_path, "--epochs=1", "--checkpoint_dir=" + dir + "/ps",
                        "--export_keras=" + dir + "/ps.keras"};
  options.worker_args = {"--device=cpu"};
  ProcessGroup cluster;
  ASSERT_TRUE(StartLocalCluster(options, &cluster).ok());
  ProcessRun run = CollectRun(cluster, absl::Minutes(5), absl::Seconds(10));
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  const std::vector<double> losses = ParseEpochLosses(run.stdout_of["chief"]);
  ASSERT_EQ(losses.size(), 1u) << run.stdout_of["chief"];
  EXPECT_LT(losses[0], fresh_losses[0] - 0.1) << run.stdout_of["chief"] << fresh;
  const std::string ps_checked =
      RunToEnd("/usr/bin/python3", {"tools/testdata/check_keras_file.py", dir + "/ps.keras",
                                    LatestCheckpoint(dir + "/ps")});
  EXPECT_NE(ps_checked.find("ok: 3 layers, 4 tensors"), std::string::npos) << ps_checked;
}

// The CNN example (Conv2D, BatchNormalization, pooling): kernels in Keras's (height, width,
// in, out) layout and BatchNormalization's four vectors, the moving statistics included,
// go into the file and come back. Evaluation normalizes with the moving statistics, so
// equal figures from the file and the checkpoint show they round-tripped.
TEST(KerasRoundTripTest, ACnnWithBatchNormalizationRoundTrips) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = std::getenv("TEST_TMPDIR");
  nlohmann::json job = nlohmann::json::parse(ReadFile("examples/fashion_mnist_cnn.json"));
  job["fit"]["steps_per_epoch"] = 60;  // a short epoch: the statistics move off their start
  const std::string job_path = dir + "/cnn.json";
  std::ofstream(job_path) << job.dump(2);
  const std::string checkpoints = dir + "/cnn_ckpt";
  const std::string keras = dir + "/cnn.keras";
  RunToEnd("train/train", {"--job=" + job_path, "--epochs=1", "--checkpoint_dir=" + checkpoints,
                            "--export_keras=" + keras});
  const std::string checked = RunToEnd(
      "/usr/bin/python3",
      {"tools/testdata/check_keras_file.py", keras, LatestCheckpoint(checkpoints)});
  // 11 layers after the input; 2 Conv2D with a kernel (no bias: BatchNormalization
  // follows), 2 BatchNormalization with gamma, beta, moving mean and moving variance, and
  // 2 Dense with kernel and bias.
  EXPECT_NE(checked.find("ok: 11 layers, 14 tensors equal to the checkpoint's"),
            std::string::npos)
      << checked;

  nlohmann::json from_file = job;
  from_file["model"] = keras;
  from_file.erase("compile");
  const std::string from_file_path = dir + "/cnn_from_keras.json";
  std::ofstream(from_file_path) << from_file.dump(2);
  const std::string from_checkpoint =
      RunToEnd("tools/evaluate", {"--checkpoint=" + checkpoints});
  const std::string from_keras = RunToEnd("tools/evaluate", {"--job=" + from_file_path});
  EXPECT_EQ(Figures(from_keras), Figures(from_checkpoint)) << from_keras << from_checkpoint;
  EXPECT_NE(Figures(from_keras).find("test accuracy"), std::string::npos) << from_keras;
}

TEST(KerasRoundTripTest, ABadKerasModelIsRefusedInOneLine) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string not_zip = dir + "/broken.keras";
  std::ofstream(not_zip) << "this is not a zip archive";
  nlohmann::json job = nlohmann::json::parse(ReadFile("examples/fashion_mnist.json"));
  job["model"] = not_zip;
  const std::string job_path = dir + "/broken.json";
  std::ofstream(job_path) << job.dump(2);
  ProcessGroup group;
  ASSERT_TRUE(group.Start({"train", "train/train", {"--job=" + job_path}, kOneBlasThread}).ok());
  ProcessRun run = CollectRun(group, absl::Minutes(1), absl::Seconds(5));
  ASSERT_EQ(run.exits.size(), 1u);
  EXPECT_NE(run.exits[0].exit_code, 0);
  const std::string& err = run.stderr_of["train"];
  EXPECT_NE(err.find("broken.keras is not a zip archive"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

  // An export path Keras would not load is refused before any training.
  ProcessGroup bad_export;
  ASSERT_TRUE(bad_export
                  .Start({"train", "train/train",
                          {"--job=examples/fashion_mnist.json", "--export_keras=" + dir + "/m.h5"},
                          kOneBlasThread})
                  .ok());
  ProcessRun refused = CollectRun(bad_export, absl::Minutes(1), absl::Seconds(5));
  ASSERT_EQ(refused.exits.size(), 1u);
  EXPECT_EQ(refused.exits[0].exit_code, 2);
  const std::string& said = refused.stderr_of["train"];
  EXPECT_NE(said.find("m.h5 does not end in .keras"), std::string::npos) << said;
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  EXPECT_TRUE(refused.stdout_of["train"].find("Epoch") == std::string::npos);
}

}  // namespace
}  // namespace pstrain
