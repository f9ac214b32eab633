// The seed's classifier (784-64 relu, dropout 0.2, 10 softmax; Adam, sparse CE, batch 64)
// trained in one process on the real Fashion-MNIST must reach Keras's figure: >= 0.85
// test accuracy within 10 epochs. Stops at the first epoch that reaches it (usually 2-4),
// to keep CI short.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "common/data/data_spec.h"
#include "common/model/job_spec.h"
#include "gtest/gtest.h"
#include "pstrain/pstrain.h"

namespace pstrain {
namespace {

// The example job a user starts from (//examples:fashion_mnist.json), as it is in the
// tree: a change to it that loses the accuracy fails here.
constexpr char kJobPath[] = "examples/fashion_mnist.json";

constexpr double kTarget = 0.85;

TEST(FashionMnistAccuracyTest, SeedModelReachesKerasAccuracy) {
  if (access(kFashionMnistDir, F_OK) != 0) {
    GTEST_SKIP() << kFashionMnistDir
                 << " is absent: install the Debian package dataset-fashion-mnist";
  }
  std::ifstream file(kJobPath);
  ASSERT_TRUE(file.good()) << kJobPath;
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  absl::StatusOr<JobSpec> job = ParseJobSpec(text, "examples");
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<FitData> data = LoadFitData(*job, "examples");
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->train->num_examples(), 60000);
  ASSERT_EQ(data->validation->num_examples(), 10000);

  absl::StatusOr<std::unique_ptr<distribute::Strategy>> strategy =
      distribute::CreateStrategy(distribute::StrategyOptions());
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  FitOptions options;
  double best = 0;
  options.on_epoch = [&](const EpochSummary& s) {
    std::printf("%s\n", FormatEpochLine(s).c_str());
    best = std::max(best, s.val_accuracy);
    return s.val_accuracy < kTarget;  // stop once reached
  };
  absl::StatusOr<FitResult> result = Fit(*job, *data, strategy->get(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_LE(result->history.size(), 10u);
  EXPECT_GE(best, kTarget) << "after " << result->history.size() << " epochs";
  EXPECT_GE(result->history.back().val_accuracy, kTarget);
}

}  // namespace
}  // namespace pstrain
