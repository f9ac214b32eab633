// Every binary a user runs, daemons, tools and benchmarks: --help prints its usage and
// exits 0, --version prints pstrain's version, the build configuration and the versions
// of gRPC, protobuf and OpenBLAS, and exits 0.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

const std::vector<std::string>& Binaries() {
  static const auto* binaries = new std::vector<std::string>{
      "ps_server/ps_server", "worker/worker",         "chief/chief",
      "train/train",        "deploy/local/launcher", "tools/psctl",
      "tools/evaluate",      "tools/export_safetensors", "tools/export_keras", "bench/train_throughput",
      "bench/ps_throughput", "bench/allreduce_bandwidth", "bench/embedding_throughput",
      "bench/checkpoint_throughput", "examples/custom_loop"};
  return *binaries;
}

ProcessRun RunOnce(const std::string& binary, const std::string& flag) {
  ProcessGroup group;
  EXPECT_TRUE(group.Start({"binary", binary, {flag}, {}}).ok()) << binary;
  return CollectRun(group, absl::Seconds(60), absl::Seconds(5));
}

TEST(CliTest, HelpExitsZeroAndListsTheFlags) {
  for (const std::string& binary : Binaries()) {
    ProcessRun run = RunOnce(binary, "--help");
    ASSERT_EQ(run.exits.size(), 1u);
    EXPECT_EQ(run.exits[0].exit_code, 0) << binary << " " << DescribeExit(run.exits[0]) << "\n"
                                         << run.stderr_of["binary"];
    const std::string& out = run.stdout_of["binary"];
    EXPECT_TRUE(absl::StrContains(out, "--")) << binary << " --help printed:\n" << out;
  }
}

TEST(CliTest, VersionExitsZeroAndSaysWhatWasBuilt) {
  for (const std::string& binary : Binaries()) {
    ProcessRun run = RunOnce(binary, "--version");
    ASSERT_EQ(run.exits.size(), 1u);
    EXPECT_EQ(run.exits[0].exit_code, 0) << binary << " " << DescribeExit(run.exits[0]) << "\n"
                                         << run.stderr_of["binary"];
    const std::string& out = run.stdout_of["binary"];
    for (const std::string& expected :
         {absl::StrCat("(pstrain ", kPstrainVersion, ")"), absl::StrCat("build: ", BuildConfiguration()),
          std::string("gRPC 1."), std::string("protobuf 3."), std::string("OpenBLAS 0.")}) {
      EXPECT_TRUE(absl::StrContains(out, expected)) << binary << " --version printed:\n"
                                                    << out << "\nwithout: " << expected;
    }
  }
}

// The container image's version label is the binaries' version.
TEST(CliTest, TheImageLabelIsTheVersion) {
  std::ifstream in("deploy/docker/Dockerfile");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(absl::StrContains(
      text.str(), absl::StrCat("org.opencontainers.image.version=\"", kPstrainVersion, "\"")))
      << "deploy/docker/Dockerfile's version label is not " << kPstrainVersion;
}

// These tests are built optimized (as every binary): NDEBUG with optimization.
TEST(CliTest, OptimizedBuildsDefineNdebug) {
  EXPECT_TRUE(absl::StartsWith(BuildConfiguration(), "C")) << BuildConfiguration();
  EXPECT_TRUE(absl::StrContains(BuildConfiguration(), ", optimized")) << BuildConfiguration();
  EXPECT_FALSE(absl::StrContains(BuildConfiguration(), "assertions")) << BuildConfiguration();
}

}  // namespace
}  // namespace pstrain
