#include "common/rpc/grpc_util.h"

#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"

namespace pstrain {
namespace {

TEST(GrpcUtilTest, StatusConversionKeepsCodeAndNamesPeer) {
  absl::Status status = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::NOT_FOUND, "no variable w"), "ps task 1 (h:1)");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "ps task 1 (h:1): no variable w");
  grpc::Status back = ToGrpcStatus(absl::InvalidArgumentError("bad shape"));
  EXPECT_EQ(back.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(back.error_message(), "bad shape");
}

TEST(GrpcUtilTest, UnreachablePeerFailsWithinDeadlineAndIsNamed) {
  // Bind a server to get a free port, then stop it so nothing listens there.
  auto running = StartServer({"127.0.0.1:0", {}});
  ASSERT_TRUE(running.ok()) << running.status();
  const std::string address = "127.0.0.1:" + std::to_string(running->port);
  running->server->Shutdown();
  running->server.reset();

  auto stub = grpc::health::v1::Health::NewStub(CreateChannel(address));
  grpc::ClientContext context;
  SetTimeout(&context, absl::Milliseconds(300));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  absl::Status status = FromGrpcStatus(stub->Check(&context, request, &response), "chief");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message().substr(0, 7), "chief: ");
}

TEST(GrpcUtilTest, StartedServerAnswersHealthChecks) {
  auto running = StartServer({"127.0.0.1:0", {}});
  ASSERT_TRUE(running.ok()) << running.status();
  auto stub = grpc::health::v1::Health::NewStub(
      CreateChannel("127.0.0.1:" + std::to_string(running->port)));
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  running->server->Shutdown();
}

}  // namespace
}  // namespace pstrain
