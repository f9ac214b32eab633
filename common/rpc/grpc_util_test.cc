#include "common/rpc/grpc_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// A peer that takes the TCP connection but is slow to answer the handshake (a loaded
// machine): the call waits for it up to its own deadline instead of failing UNAVAILABLE
// when a 100 ms connection attempt gives up. Here the listener never accepts, so the call
// ends at its deadline.
TEST(GrpcUtilTest, ASlowHandshakeIsWaitedForUntilTheCallsDeadline) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 16), 0);  // the kernel completes TCP handshakes; nobody answers
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  auto stub = grpc::health::v1::Health::NewStub(CreateChannel(address));
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(2));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  close(fd);
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
