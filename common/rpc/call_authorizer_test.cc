#include "common/rpc/call_authorizer.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/rpc/call_mac.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "gtest/gtest.h"
#include "proto/function.grpc.pb.h"
#include "proto/health.grpc.pb.h"

namespace pstrain {
namespace {

constexpr char kToken[] = "0123456789abcdef-test-token";

// A worker service whose Shutdown only counts that it ran, and whose GetStatus answers
// whether its caller is worker 1.
class CountingWorker final : public FunctionWorker::Service {
 public:
  grpc::Status Shutdown(grpc::ServerContext* context, const ShutdownRequest*,
                        ShutdownResponse*) override {
    shutdowns.fetch_add(1);
    std::string seen;
    for (const auto& [key, value] : context->client_metadata()) {
      seen.append(key.data(), key.size()).append("=").append(value.data(), value.size());
    }
    absl::MutexLock lock(&mu);
    metadata_seen += seen;
    return answer;
  }
  grpc::Status GetStatus(grpc::ServerContext* context, const FunctionWorkerStatusRequest*,
                         FunctionWorkerStatusResponse*) override {
    return CheckCallerIsTask(*context, "worker", 1);
  }
  std::atomic<int> shutdowns{0};
  absl::Mutex mu;
  std::string metadata_seen ABSL_GUARDED_BY(mu);
  // What Shutdown answers (set before the server starts).
  grpc::Status answer = grpc::Status::OK;
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
    auto stub = FunctionWorker::NewStub(CreateChannel(address_));
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
    auto stub = FunctionWorker::NewStub(CreateChannel(address_));
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(10));
    FunctionWorkerStatusRequest request;
    FunctionWorkerStatusResponse response;
    const grpc::Status status = stub->GetStatus(&context, request, &response);
    EXPECT_EQ(status.error_code(), expected) << FormatIdentity(identity) << ": "
                                             << status.error_message();
  }
}

TEST_F(CallAuthorizerTest, TheTokenIsNeverSent) {
  ASSERT_TRUE(CallShutdown({kToken, {Role::kChief, 0}}).ok());
  absl::MutexLock lock(&service_.mu);
  EXPECT_NE(service_.metadata_seen.find(kMacMetadataKey), std::string::npos);
  EXPECT_EQ(service_.metadata_seen.find(kToken), std::string::npos) << service_.metadata_seen;
}

constexpr char kShutdownMethod[] = "/pstrain.FunctionWorker/Shutdown";

// Shutdown on a channel with no interceptors, with the metadata given.
grpc::Status RawShutdown(const std::string& address,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  auto stub = FunctionWorker::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(10));
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
  ShutdownRequest request;
  ShutdownResponse response;
  return stub->Shutdown(&context, request, &response);
}

std::vector<std::pair<std::string, std::string>> SignedAs(const std::string& claim,
                                                          int64_t time_micros,
                                                          const std::string& nonce) {
  return {{kIdentityMetadataKey, claim},
          {kTimeMetadataKey, std::to_string(time_micros)},
          {kNonceMetadataKey, nonce},
          {kMacMetadataKey, CallMac(kToken, kShutdownMethod, claim, time_micros, nonce)}};
}

TEST_F(CallAuthorizerTest, AReplayedCallIsRefusedAndNoHandlerRuns) {
  const auto call = SignedAs("chief", absl::ToUnixMicros(absl::Now()), NewCallNonce());
  ASSERT_TRUE(RawShutdown(address_, call).ok());
  const grpc::Status replay = RawShutdown(address_, call);
  EXPECT_EQ(replay.error_code(), grpc::StatusCode::UNAUTHENTICATED) << replay.error_message();
  EXPECT_NE(replay.error_message().find("replayed"), std::string::npos) << replay.error_message();
  EXPECT_EQ(service_.shutdowns.load(), 1);
}

TEST_F(CallAuthorizerTest, AStaleOrAlteredCallIsRefused) {
  const int64_t stale = absl::ToUnixMicros(absl::Now() - absl::Minutes(2));
  EXPECT_EQ(RawShutdown(address_, SignedAs("chief", stale, NewCallNonce())).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // The identity changed after signing ("admin" signed, "chief" claimed).
  auto altered = SignedAs("admin", absl::ToUnixMicros(absl::Now()), NewCallNonce());
  altered[0].second = "chief";
  EXPECT_EQ(RawShutdown(address_, altered).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // The secret itself, sent as before, no longer opens anything.
  EXPECT_EQ(RawShutdown(address_, {{"x-pstrain-token", kToken}, {kIdentityMetadataKey, "chief"}})
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(service_.shutdowns.load(), 0);
}

// The reply proofs in `metadata`, joined by commas.
std::string ProofsIn(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) {
  std::string proofs;
  auto [begin, end] = metadata.equal_range(kReplyProofMetadataKey);
  for (auto it = begin; it != end; ++it) {
    if (!proofs.empty()) proofs += ",";
    proofs.append(it->second.data(), it->second.size());
  }
  return proofs;
}

// Signs `context` for `method` as the chief with `nonce`, as the client interceptor would.
void SignAsChief(absl::string_view method, const std::string& nonce, grpc::ClientContext* context) {
  const int64_t now = absl::ToUnixMicros(absl::Now());
  context->AddMetadata(kIdentityMetadataKey, "chief-0");
  context->AddMetadata(kTimeMetadataKey, std::to_string(now));
  context->AddMetadata(kNonceMetadataKey, nonce);
  context->AddMetadata(kMacMetadataKey, CallMac(kToken, method, "chief-0", now, nonce));
}

// A unary answer carries the proof once in its initial and once in its trailing metadata
// (the factory puts it in the call's context: no interceptor), a stream's at its start
// (an interceptor adds it as the metadata goes out); a call without a MAC gets none.
TEST_F(CallAuthorizerTest, TheProofComesOnceInEachMetadataOfUnaryAndStreamingAnswers) {
  SetClientSecurity({});  // no token: this test signs its calls itself
  std::shared_ptr<grpc::Channel> channel = CreateChannel(address_);
  const std::string shutdown_method = "/pstrain.FunctionWorker/Shutdown";
  const std::string nonce(32, 'a');
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(10));
  SignAsChief(shutdown_method, nonce, &context);
  ShutdownRequest request;
  ShutdownResponse response;
  const grpc::Status status =
      FunctionWorker::NewStub(channel)->Shutdown(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string proof = ReplyProof(kToken, shutdown_method, nonce);
  EXPECT_EQ(ProofsIn(context.GetServerInitialMetadata()), proof);
  EXPECT_EQ(ProofsIn(context.GetServerTrailingMetadata()), proof);

  const std::string watch_method = "/grpc.health.v1.Health/Watch";
  const std::string watch_nonce(32, 'b');
  grpc::ClientContext watch_context;
  SetTimeout(&watch_context, absl::Seconds(10));
  SignAsChief(watch_method, watch_nonce, &watch_context);
  grpc::health::v1::HealthCheckRequest health_request;
  auto reader = grpc::health::v1::Health::NewStub(channel)->Watch(&watch_context, health_request);
  grpc::health::v1::HealthCheckResponse health_response;
  ASSERT_TRUE(reader->Read(&health_response));
  EXPECT_EQ(ProofsIn(watch_context.GetServerInitialMetadata()),
            ReplyProof(kToken, watch_method, watch_nonce));
  watch_context.TryCancel();
  reader->Finish().IgnoreError();

  grpc::ClientContext unsigned_context;
  SetTimeout(&unsigned_context, absl::Seconds(10));
  grpc::health::v1::HealthCheckResponse check_response;
  ASSERT_TRUE(grpc::health::v1::Health::NewStub(channel)
                  ->Check(&unsigned_context, health_request, &check_response)
                  .ok());
  EXPECT_EQ(ProofsIn(unsigned_context.GetServerInitialMetadata()), "");
  EXPECT_EQ(ProofsIn(unsigned_context.GetServerTrailingMetadata()), "");
}

// A server that does not hold the token (here: one with no authorizer) answers OK; the
// client does not take it.
TEST_F(CallAuthorizerTest, AnAnswerWithoutTheServersProofIsRefused) {
  CountingWorker impostor;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.services = {&impostor};
  absl::StatusOr<RunningServer> running = StartServer(options);
  ASSERT_TRUE(running.ok()) << running.status();
  const std::string address = "127.0.0.1:" + std::to_string(running->port);
  ClientSecurity chief{kToken, {Role::kChief, 0}};
  chief.require_server_proof = true;
  SetClientSecurity(chief);
  auto stub = FunctionWorker::NewStub(CreateChannel(address));
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(10));
  ShutdownRequest request;
  ShutdownResponse response;
  const grpc::Status status = stub->Shutdown(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_NE(status.error_message().find("did not prove"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(impostor.shutdowns.load(), 1);  // it ran, and learned no token
  {
    absl::MutexLock lock(&impostor.mu);
    EXPECT_EQ(impostor.metadata_seen.find(kToken), std::string::npos);
  }
  running->server->Shutdown();
  // An error a client acts on (a task that registers gives up on INVALID_ARGUMENT) is
  // refused too; one it only retries or reports passes as it came.
  for (const auto& [answered, seen] :
       {std::pair<grpc::StatusCode, grpc::StatusCode>{grpc::StatusCode::INVALID_ARGUMENT,
                                                      grpc::StatusCode::UNAUTHENTICATED},
        {grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::UNAUTHENTICATED},
        {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::UNAVAILABLE}}) {
    CountingWorker failing;
    failing.answer = grpc::Status(answered, "from an impostor");
    options.services = {&failing};
    absl::StatusOr<RunningServer> started = StartServer(options);
    ASSERT_TRUE(started.ok()) << started.status();
    auto failing_stub =
        FunctionWorker::NewStub(CreateChannel("127.0.0.1:" + std::to_string(started->port)));
    grpc::ClientContext failing_context;
    SetTimeout(&failing_context, absl::Seconds(10));
    const grpc::Status got = failing_stub->Shutdown(&failing_context, request, &response);
    EXPECT_EQ(got.error_code(), seen) << answered << ": " << got.error_message();
    started->server->Shutdown();
  }
  // The job's own server proves it: its answers pass, the open health check's too.
  auto real = FunctionWorker::NewStub(CreateChannel(address_));
  grpc::ClientContext real_context;
  SetTimeout(&real_context, absl::Seconds(10));
  const grpc::Status proven = real->Shutdown(&real_context, request, &response);
  EXPECT_TRUE(proven.ok()) << proven.error_message();
  EXPECT_EQ(service_.shutdowns.load(), 1);
  auto health = grpc::health::v1::Health::NewStub(CreateChannel(address_));
  grpc::ClientContext health_context;
  SetTimeout(&health_context, absl::Seconds(10));
  grpc::health::v1::HealthCheckRequest health_request;
  grpc::health::v1::HealthCheckResponse health_response;
  const grpc::Status healthy = health->Check(&health_context, health_request, &health_response);
  EXPECT_TRUE(healthy.ok()) << healthy.error_message();
}

}  // namespace
}  // namespace pstrain
