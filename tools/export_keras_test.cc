// tools/export_keras as a real process on a real checkpoint (written by CheckpointWriter
// from a model's drawn weights), checked by tools/testdata/check_keras_file.py with
// Python's zipfile and h5py (no pstrain code): Keras 3's layout, and every layer's
// weights equal to the checkpoint's. Bad usage and bad checkpoints fail in one line and
// leave no file.

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/model/job_spec.h"
#include "common/model/model.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using nlohmann::json;

// Two Dense layers of the same class (Keras names their groups dense, dense_1, dense_2),
// a Flatten, a Dropout, a Dense without bias.
constexpr char kJob[] = R"({
  "model": {"class_name": "Sequential", "config": {"name": "exported", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 6, 5]}},
    {"class_name": "Flatten", "config": {"name": "flatten"}},
    {"class_name": "Dense", "config": {"name": "hidden", "units": 12, "activation": "relu"}},
    {"class_name": "Dropout", "config": {"name": "dropout", "rate": 0.25}},
    {"class_name": "Dense", "config": {"name": "narrow", "units": 7, "use_bias": false}},
    {"class_name": "Dense", "config": {"name": "out", "units": 4, "activation": "softmax"}}
  ]}},
  "compile": {"optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.002}},
              "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]},
  "fit": {"epochs": 1, "batch_size": 8},
  "data": {"train": {"type": "synthetic", "samples": 64, "features": 30, "classes": 4}}
})";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

class ExportKerasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", ::testing::UnitTest::GetInstance()
                                                              ->current_test_info()
                                                              ->name());
    absl::StatusOr<JobSpec> spec = ParseJobSpec(kJob, ".");
    ASSERT_TRUE(spec.ok()) << spec.status();
    job_ = json::parse(SerializeJobSpec(*spec));
    absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJson(spec->model, nullptr);
    ASSERT_TRUE(model.ok()) << model.status();
    // Drawn weights, with every bias made non-zero so that no tensor is all zeros.
    std::vector<Tensor> values = (*model)->InitialValues(11);
    for (size_t v = 0; v < values.size(); ++v) {
      float* data = values[v].data();
      for (int64_t i = 0; i < values[v].num_elements(); ++i) data[i] += 0.001f * (i % 13) + v;
      contents_.tensors.push_back({(*model)->variables()[v].name, values[v]});
      // An optimizer slot, as fit writes them: not a layer variable.
      contents_.tensors.push_back(
          {absl::StrCat((*model)->variables()[v].name, "/optimizer/m"), values[v]});
    }
    contents_.step = 120;
    contents_.epoch = 3;
    *contents_.job_spec = job_;
  }

  std::string WriteCheckpoint(const CheckpointContents& contents) {
    absl::StatusOr<std::string> path =
        CheckpointWriter(absl::StrCat(dir_, "/ckpt"), {}).Write(contents);
    EXPECT_TRUE(path.ok()) << path.status();
    return path.ok() ? *path : "";
  }

  std::string dir_;
  json job_;
  CheckpointContents contents_;
};

TEST_F(ExportKerasTest, PythonReadsKerasLayoutAndTheCheckpointsWeights) {
  const std::string checkpoint = WriteCheckpoint(contents_);
  const std::string out = absl::StrCat(dir_, "/model.keras");
  // The checkpoint root: its newest checkpoint is exported.
  const CommandResult exported =
      RunCommand(absl::StrCat("tools/export_keras --checkpoint=", dir_, "/ckpt --out=", out));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("step 120"), std::string::npos) << exported.output;

  const CommandResult checked = RunCommand(absl::StrCat(
      "/usr/bin/python3 tools/testdata/check_keras_file.py ", out, " ", checkpoint));
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  // 5 layers; hidden's kernel and bias, narrow's kernel, out's kernel and bias.
  EXPECT_NE(checked.output.find("ok: 5 layers, 5 tensors equal to the checkpoint's"),
            std::string::npos)
      << checked.output;

  // What Keras would rebuild: the layers by class and name, the input shape and compile.
  const CommandResult config = RunCommand(absl::StrCat(
      "/usr/bin/python3 -c \"import json, zipfile; c = json.loads(zipfile.ZipFile('", out,
      "').read('config.json')); print([(l['class_name'], l['config']['name']) for l in "
      "c['config']['layers']], c['config']['layers'][0]['config']['batch_shape'], "
      "c['compile_config']['optimizer']['class_name'], "
      "c['compile_config']['optimizer']['config']['learning_rate'], "
      "c['compile_config']['loss']['class_name'])\""));
  ASSERT_EQ(config.exit_code, 0) << config.output;
  EXPECT_EQ(config.output,
            "[('InputLayer', 'input_layer'), ('Flatten', 'flatten'), ('Dense', 'hidden'), "
            "('Dropout', 'dropout'), ('Dense', 'narrow'), ('Dense', 'out')] [None, 6, 5] Adam "
            "0.002 SparseCategoricalCrossentropy\n");
}

TEST_F(ExportKerasTest, TheCheckerCatchesADifferentWeight) {
  // The checker is not a rubber stamp: a checkpoint that differs in one value fails it.
  WriteCheckpoint(contents_);
  const std::string out = absl::StrCat(dir_, "/model.keras");
  ASSERT_EQ(RunCommand(absl::StrCat("tools/export_keras --checkpoint=", dir_, "/ckpt --out=", out))
                .exit_code,
            0);
  CheckpointContents changed = contents_;
  changed.step = 121;
  changed.tensors[0].tensor.data()[3] += 1.0f;
  const std::string other = WriteCheckpoint(changed);
  const CommandResult checked = RunCommand(absl::StrCat(
      "/usr/bin/python3 tools/testdata/check_keras_file.py ", out, " ", other));
  EXPECT_EQ(checked.exit_code, 1) << checked.output;
  EXPECT_NE(checked.output.find("layers/dense/vars/0 (hidden/kernel) differs"), std::string::npos)
      << checked.output;
}

TEST_F(ExportKerasTest, BadUsageAndBadCheckpointsFailInOneLineAndWriteNothing) {
  const std::string out = absl::StrCat(dir_, "/model.keras");
  struct Case {
    std::string args;
    int exit_code;
    std::string says;
  };
  CheckpointContents wrong_shape = contents_;
  wrong_shape.tensors[0].tensor = Tensor({30, 11});  // hidden/kernel is [30, 12]
  const std::string bad = WriteCheckpoint(wrong_shape);
  CheckpointContents missing = contents_;
  missing.step = 200;
  missing.tensors.erase(missing.tensors.begin() + 2);  // hidden/bias
  const std::string lacking = WriteCheckpoint(missing);
  const std::vector<Case> cases = {
      {absl::StrCat("--checkpoint=", bad, " --out=", dir_, "/model.h5"), 2,
       "does not end in .keras"},
      {absl::StrCat("--out=", out), 2, "--checkpoint and --out are required"},
      {absl::StrCat("--checkpoint=", dir_, "/none --out=", out), 1, "export_keras: "},
      {absl::StrCat("--checkpoint=", bad, " --out=", out), 1,
       "hidden/kernel has shape [30,11], the model's is [30,12]"},
      {absl::StrCat("--checkpoint=", lacking, " --out=", out), 1, "hidden/bias"},
  };
  for (const Case& c : cases) {
    const CommandResult result = RunCommand(absl::StrCat("tools/export_keras ", c.args));
    EXPECT_EQ(result.exit_code, c.exit_code) << c.args << "\n" << result.output;
    EXPECT_NE(result.output.find(c.says), std::string::npos) << c.args << "\n" << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
    EXPECT_FALSE(Exists(out)) << c.args;
  }
}

}  // namespace
}  // namespace pstrain
