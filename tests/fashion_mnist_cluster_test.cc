// The demo's job, as ./demo.sh runs it: 1 chief, 2 ps and 2 workers as separate processes
// on loopback, training the seed's model on the real Fashion-MNIST, in each consistency
// mode. Six epochs rather than the demo's ten, to keep CI short (asynchronous runs of
// four land either side of 0.85: 0.8455 with overlap on a fresh clone's run); the accuracy
// it reaches is asserted (its best epoch, the last within 0.02 of it: asynchronous
// training ends a little either side).

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

// The consistency modes ./demo.sh offers: async (default), --staleness=2, --sync; and
// async with the job's "overlap": true.
class FashionMnistClusterTest : public ::testing::TestWithParam<std::vector<std::string>> {};

constexpr int kEpochs = 6;

TEST_P(FashionMnistClusterTest, ParameterServerTrainingReachesRealAccuracy) {
  struct stat st;
  if (stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", &st) != 0) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)";
  }
  LocalClusterOptions options;
  options.bin_dir = ".";
  std::string job = "examples/fashion_mnist.json";
  const bool overlap = GetParam() == std::vector<std::string>{"overlap"};
  if (overlap) {
    // The demo's job with "overlap": true (async): a step computes while the previous
    // one's push is in flight, one of the worker's own pushes behind.
    std::ifstream in(job);
    nlohmann::json spec = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(spec.is_discarded());
    spec["overlap"] = true;
    job = FreshTestDir("fashion_mnist_overlap") + "/job.json";
    std::ofstream(job) << spec.dump(1);
  }
  options.chief_args = {"--job=" + job, absl::StrCat("--epochs=", kEpochs)};
  if (!overlap) {
    for (const std::string& arg : GetParam()) options.chief_args.push_back(arg);
  }
  options.worker_args = {"--device=cpu"};
  ProcessGroup group;
  ASSERT_TRUE(StartLocalCluster(options, &group).ok());
  std::string chief_out, chief_log, errors;
  auto exits = group.Wait(absl::Minutes(10), absl::Seconds(10),
                          [&](int, const std::string& name, bool is_stderr, const std::string& line) {
                            if (name == "chief") (is_stderr ? chief_log : chief_out) += line + "\n";
                            if (is_stderr && line.rfind("E ", 0) == 0) errors += name + ": " + line + "\n";
                          },
                          nullptr);
  for (const auto& exit : exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n" << errors;
  }
  const std::vector<double> losses = ParseEpochLosses(chief_out);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kEpochs)) << chief_out;
  EXPECT_LT(losses.back(), losses.front()) << chief_out;
  ExpectReachesValAccuracy(chief_out, 0.85);
  // The mode asked for is the mode the ps tasks ran.
  if (!GetParam().empty() && !overlap) {
    const std::string mode = GetParam()[0].substr(GetParam()[0].find('=') + 1);
    EXPECT_NE(chief_log.find("consistency: " + mode), std::string::npos) << chief_log;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, FashionMnistClusterTest,
    ::testing::Values(std::vector<std::string>{},
                      std::vector<std::string>{"--consistency=bounded_staleness", "--staleness=2"},
                      std::vector<std::string>{"--consistency=sync"},
                      std::vector<std::string>{"overlap"}),
    [](const ::testing::TestParamInfo<std::vector<std::string>>& info) {
      if (info.param.empty()) return std::string("Async");
      if (info.param.size() == 2) return std::string("BoundedStaleness2");
      return info.param[0] == "overlap" ? std::string("AsyncOverlap") : std::string("Sync");
    });

}  // namespace
}  // namespace pstrain
