// The seed's classifier (784-64 relu, dropout 0.2, 10 softmax; Adam, sparse CE, batch 64)
// trained in one process on the real Fashion-MNIST must reach Keras's figure: >= 0.85
// test accuracy within 10 epochs. Stops at the first epoch that reaches it (usually 2-4),
// to keep CI short.

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/data/data_spec.h"
#include "common/model/job_spec.h"
#include "gtest/gtest.h"
#include "worker/fit.h"
#include "worker/strategy.h"

namespace pstrain {
namespace {

// examples/fashion_mnist.json, inline: the examples folder is not a Bazel package.
constexpr char kJob[] = R"json({
  "model": {
    "class_name": "Sequential",
    "config": {
      "name": "seed",
      "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 784], "dtype": "float32", "name": "input"}},
        {"class_name": "Dense", "config": {"name": "dense", "units": 64, "activation": "relu", "use_bias": true,
          "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}},
          "bias_initializer": {"class_name": "Zeros", "config": {}}}},
        {"class_name": "Dropout", "config": {"name": "dropout", "rate": 0.2}},
        {"class_name": "Dense", "config": {"name": "dense_1", "units": 10, "activation": "softmax", "use_bias": true,
          "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": null}},
          "bias_initializer": {"class_name": "Zeros", "config": {}}}}
      ]
    }
  },
  "compile": {
    "optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.001}},
    "loss": "sparse_categorical_crossentropy",
    "metrics": ["accuracy"]
  },
  "fit": {"epochs": 10, "batch_size": 64, "shuffle": true},
  "data": {
    "train": {"type": "fashion_mnist", "split": "train"},
    "validation": {"type": "fashion_mnist", "split": "test"}
  },
  "seed": 42
})json";

constexpr double kTarget = 0.85;

TEST(FashionMnistAccuracyTest, SeedModelReachesKerasAccuracy) {
  if (access(kFashionMnistDir, F_OK) != 0) {
    GTEST_SKIP() << kFashionMnistDir
                 << " is absent: install the Debian package dataset-fashion-mnist";
  }
  absl::StatusOr<JobSpec> job = ParseJobSpec(kJob, ".");
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<FitData> data = LoadFitData(*job, ".");
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->train->num_examples(), 60000);
  ASSERT_EQ(data->validation->num_examples(), 10000);

  DefaultStrategy strategy;
  FitOptions options;
  double best = 0;
  options.on_epoch = [&](const EpochSummary& s) {
    std::printf("%s\n", FormatEpochLine(s).c_str());
    best = std::max(best, s.val_accuracy);
    return s.val_accuracy < kTarget;  // stop once reached
  };
  absl::StatusOr<FitResult> result = Fit(*job, *data, &strategy, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_LE(result->history.size(), 10u);
  EXPECT_GE(best, kTarget) << "after " << result->history.size() << " epochs";
  EXPECT_GE(result->history.back().val_accuracy, kTarget);
}

}  // namespace
}  // namespace pstrain
