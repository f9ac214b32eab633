#include "common/daemon/daemon_options.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

DaemonOptions WorkerAt(const std::string& address) {
  DaemonOptions options;
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      R"({"cluster":{"chief":["c:1"],"worker":[")" + address + R"("]},"task":{"type":"worker","index":0}})");
  EXPECT_TRUE(config.ok()) << config.status();
  if (config.ok()) options.config = *config;
  return options;
}

TEST(DaemonOptionsTest, LoopbackHosts) {
  for (const char* host : {"localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "10.0.0.1", "128.0.0.1", "127.0.0", "127.0.0.256",
                           "worker-0.job.svc", "127.0.0.1.example.com", "", "::"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(DaemonOptionsTest, ALoopbackTaskListensOnItsOwnHostOnly) {
  EXPECT_EQ(*ResolveListenAddress(WorkerAt("127.0.0.1:4001")), "127.0.0.1:4001");
  EXPECT_EQ(*ResolveListenAddress(WorkerAt("localhost:4001")), "localhost:4001");
  EXPECT_EQ(*ResolveListenAddress(WorkerAt("[::1]:4001")), "[::1]:4001");
}

TEST(DaemonOptionsTest, AServiceNameListensOnEveryInterface) {
  EXPECT_EQ(*ResolveListenAddress(WorkerAt("worker-0.job.svc:2222")), "0.0.0.0:2222");
  EXPECT_EQ(*ResolveListenAddress(WorkerAt("10.1.2.3:2222")), "0.0.0.0:2222");
}

TEST(DaemonOptionsTest, BindChoosesTheHostAndMayChooseThePort) {
  DaemonOptions options = WorkerAt("worker-0.job.svc:2222");
  options.bind = "127.0.0.1";
  EXPECT_EQ(*ResolveListenAddress(options), "127.0.0.1:2222");
  options.bind = "[::]";
  EXPECT_EQ(*ResolveListenAddress(options), "[::]:2222");
  options.bind = "0.0.0.0:7000";
  EXPECT_EQ(*ResolveListenAddress(options), "0.0.0.0:7000");
  options = WorkerAt("localhost:4001");
  options.bind = "0.0.0.0";
  EXPECT_EQ(*ResolveListenAddress(options), "0.0.0.0:4001");
}

// A process that is not a daemon (a custom training loop) follows the same rules.
TEST(DaemonOptionsTest, ListenAddressForFollowsTheLoopbackRule) {
  EXPECT_EQ(*ListenAddressFor("127.0.0.1:4001"), "127.0.0.1:4001");
  EXPECT_EQ(*ListenAddressFor("[::1]:4001"), "[::1]:4001");
  EXPECT_EQ(*ListenAddressFor("worker-0.job.svc:2222"), "0.0.0.0:2222");
  EXPECT_TRUE(absl::IsInvalidArgument(ListenAddressFor("worker-0.job.svc").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ListenAddressFor("h:http").status()));
}

// TF_CONFIG's own ports are checked when it is parsed; --bind's here.
TEST(DaemonOptionsTest, ABindWithoutAValidPortIsAnError) {
  DaemonOptions options = WorkerAt("h:1");
  for (const char* bind : {"127.0.0.1:http", "127.0.0.1:99999", "h:-1", "[::1]:"}) {
    options.bind = bind;
    EXPECT_TRUE(absl::IsInvalidArgument(ResolveListenAddress(options).status())) << bind;
  }
}

TEST(DaemonOptionsTest, HealthPortFromEnvironmentIsAPortOrNothing) {
  unsetenv(kHealthPortEnvironmentVariable);
  EXPECT_EQ(*HealthPortFromEnvironment(), 0);
  setenv(kHealthPortEnvironmentVariable, "2223", 1);
  EXPECT_EQ(*HealthPortFromEnvironment(), 2223);
  for (const char* bad : {"0", "65536", "-1", "22x", "port"}) {
    setenv(kHealthPortEnvironmentVariable, bad, 1);
    absl::StatusOr<int> port = HealthPortFromEnvironment();
    EXPECT_TRUE(absl::IsInvalidArgument(port.status())) << bad;
    EXPECT_NE(port.status().message().find(bad), std::string::npos) << port.status();
  }
  unsetenv(kHealthPortEnvironmentVariable);
}

TEST(DaemonOptionsTest, ChiefAddressNeedsAChief) {
  DaemonOptions options = WorkerAt("h:1");
  EXPECT_EQ(*ChiefAddress(options.config.cluster), "c:1");
  absl::StatusOr<TfConfig> chiefless =
      ParseTfConfig(R"({"cluster":{"worker":["h:1"]},"task":{"type":"worker","index":0}})");
  ASSERT_TRUE(chiefless.ok());
  EXPECT_TRUE(absl::IsNotFound(ChiefAddress(chiefless->cluster).status()));
}

}  // namespace
}  // namespace pstrain
