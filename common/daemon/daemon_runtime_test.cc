#include "common/daemon/daemon_runtime.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/daemon/exit_codes.h"
#include "deploy/local/free_port.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace pstrain {
namespace {

// A ps task alone on 127.0.0.1:`port` (its chief never comes: Serve needs none).
DaemonOptions PsOn(int port) {
  const std::string address = absl::StrCat("127.0.0.1:", port);
  absl::StatusOr<TfConfig> config = ParseTfConfig(absl::StrCat(
      R"({"cluster":{"chief":["127.0.0.1:1"],"ps":[")", address,
      R"("]},"task":{"type":"ps","index":0}})"));
  EXPECT_TRUE(config.ok()) << config.status();
  DaemonOptions options;
  if (config.ok()) options.config = *config;
  return options;
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(int port) {
  auto stub = grpc::health::v1::Health::NewStub(CreateChannel(absl::StrCat("127.0.0.1:", port)));
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

TEST(DaemonRuntimeTest, ServesHealthOnTheTasksPortAndStops) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(1);
  ASSERT_TRUE(ports.ok()) << ports.status();
  DaemonRuntime runtime(PsOn((*ports)[0]));
  ASSERT_TRUE(runtime.Serve({}).ok());
  EXPECT_EQ(runtime.port(), (*ports)[0]);
  EXPECT_EQ(Health((*ports)[0]), grpc::health::v1::HealthCheckResponse::SERVING);
  runtime.StopServing();
  runtime.StopServing();  // idempotent
}

// gRPC's default SO_REUSEPORT would let the second server start and take some of the
// connections; the runtime refuses, naming the address, and the first keeps serving.
TEST(DaemonRuntimeTest, ATakenPortIsAnErrorNamingTheAddress) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(1);
  ASSERT_TRUE(ports.ok()) << ports.status();
  const int port = (*ports)[0];
  DaemonRuntime first(PsOn(port));
  ASSERT_TRUE(first.Serve({}).ok());
  DaemonRuntime second(PsOn(port));
  const absl::Status status = second.Serve({});
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), absl::StrCat("127.0.0.1:", port)))
      << status.message();
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_EQ(second.port(), 0);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Health(port), grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

// A runtime made without metrics (as tests and in-process bodies make it) still gives the
// body a registry, with the build info every daemon exports, and serves no HTTP.
TEST(DaemonRuntimeTest, MetricsAreTheRuntimesWithTheBuildInfo) {
  DaemonRuntime runtime(PsOn(2));
  ASSERT_NE(runtime.metrics(), nullptr);
  EXPECT_EQ(runtime.metrics()->server(), nullptr);
  const std::string text = runtime.metrics()->registry()->TextFormat();
  EXPECT_TRUE(absl::StrContains(text, "pstrain_build_info")) << text;
  EXPECT_TRUE(absl::StrContains(text, "task_type=\"ps\"")) << text;
}

TEST(DaemonRuntimeTest, ASignalRequestsACleanShutdownUnlessTheBodySaysOtherwise) {
  DaemonRuntime runtime(PsOn(2));
  EXPECT_EQ(runtime.HandleSignal("SIGTERM"), kExitOk);
  EXPECT_TRUE(runtime.shutdown()->requested());
  EXPECT_EQ(runtime.shutdown()->exit_code(), kExitOk);
  EXPECT_EQ(runtime.shutdown()->reason(), "SIGTERM");

  DaemonRuntime chief(PsOn(2));
  chief.SetSignalHandler([](const std::string&) { return static_cast<int>(kExitPreempted); });
  EXPECT_EQ(chief.HandleSignal("SIGINT"), kExitPreempted);
  EXPECT_FALSE(chief.shutdown()->requested());
}

}  // namespace
}  // namespace pstrain
