#include "common/rpc/call_authorizer.h"

#include <atomic>
#include <memory>
#include <string>

#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace pstrain {
namespace {

constexpr char kToken[] = "0123456789abcdef-test-token";

// A worker service whose Shutdown only counts that it ran, and whose GetStatus answers
// whether its caller is worker 1.
class CountingWorker final : public Worker::Service {
 public:
  grpc::Status Shutdown(grpc::ServerContext*, const ShutdownRequest*, ShutdownResponse*) override {
    shutdowns.fetch_add(1);
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContext* context, const WorkerStatusRequest*,
                         WorkerStatusResponse*) override {
    return CheckCallerIsTask(*context, "worker", 1);
  }
  std::atomic<int> shutdowns{0};
};

class CallAuthorizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    authorizer_ = std::make_shared<CallAuthorizer>(kToken);
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.services = {&service_};
    options.credentials = AuthorizingServerCredentials(authorizer_);
    absl::StatusOr<RunningServer> running = StartServer(options);
    ASSERT_TRUE(running.ok()) << running.status();
    server_ = std::move(*running);
    address_ = "127.0.0.1:" + std::to_string(server_.port);
  }
  void TearDown() override {
    server_.server->Shutdown();
    SetClientSecurity({});
  }

  // Shutdown as a client with `security`.
  grpc::Status CallShutdown(const ClientSecurity& security) {
    SetClientSecurity(security);
    auto stub = Worker::NewStub(CreateChannel(address_));
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(10));
    ShutdownRequest request;
    ShutdownResponse response;
    return stub->Shutdown(&context, request, &response);
  }

  CountingWorker service_;
  std::shared_ptr<CallAuthorizer> authorizer_;
  RunningServer server_;
  std::string address_;
};

TEST_F(CallAuthorizerTest, NoTokenOrAWrongOneIsUnauthenticatedAndNoHandlerRuns) {
  const grpc::Status none = CallShutdown({"", {Role::kChief, 0}});
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  const grpc::Status wrong = CallShutdown({"0123456789abcdef-WRONG-token", {Role::kChief, 0}});
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // The refusal names no secret, neither the server's nor the caller's.
  EXPECT_EQ(wrong.error_message().find("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(service_.shutdowns.load(), 0);
  EXPECT_EQ(authorizer_->refused_unauthenticated(), 2);
}

TEST_F(CallAuthorizerTest, TheRightTokenWithAnAllowedRolePasses) {
  EXPECT_TRUE(CallShutdown({kToken, {Role::kChief, 0}}).ok());
  EXPECT_TRUE(CallShutdown({kToken, {Role::kAdmin, 0}}).ok());
  EXPECT_EQ(service_.shutdowns.load(), 2);
}

TEST_F(CallAuthorizerTest, AWorkerCannotStopAWorker) {
  const grpc::Status status = CallShutdown({kToken, {Role::kWorker, 0}});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_EQ(service_.shutdowns.load(), 0);
  EXPECT_EQ(authorizer_->refused_permission_denied(), 1);
}

TEST_F(CallAuthorizerTest, HealthNeedsNothing) {
  SetClientSecurity({});
  auto stub = grpc::health::v1::Health::NewStub(CreateChannel(address_));
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(10));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_TRUE(stub->Check(&context, request, &response).ok());
}

TEST_F(CallAuthorizerTest, AHandlerSeesWhoCallsAndNotTheToken) {
  for (const auto& [identity, expected] :
       {std::pair<CallerIdentity, grpc::StatusCode>{{Role::kWorker, 1}, grpc::StatusCode::OK},
        {{Role::kWorker, 0}, grpc::StatusCode::PERMISSION_DENIED},
        {{Role::kPs, 1}, grpc::StatusCode::PERMISSION_DENIED}}) {
    SetClientSecurity({kToken, identity});
    auto stub = Worker::NewStub(CreateChannel(address_));
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(10));
    WorkerStatusRequest request;
    WorkerStatusResponse response;
    const grpc::Status status = stub->GetStatus(&context, request, &response);
    EXPECT_EQ(status.error_code(), expected) << FormatIdentity(identity) << ": "
                                             << status.error_message();
  }
}

}  // namespace
}  // namespace pstrain
