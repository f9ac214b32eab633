// Load with exact accounting (#12): 16 concurrent authenticated clients each make 2,000
// push-and-pulls of a gradient of ones to one variable on a real ps service (the daemon's
// VariableStore and PsServiceImpl behind the daemon's authorizing server credentials,
// over gRPC on loopback), with SGD at learning rate 1. Every update must land exactly
// once: the variable ends at exactly -32,000 in every element with version 32,000 and
// 32,000 pushes counted, on the unary PushPull and on the streamed PushPullStream. A
// 17th client with a wrong token pushes all along and changes nothing.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "gtest/gtest.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

constexpr char kToken[] = "ps-load-test-token-0123456789abcdef";
constexpr int kClients = 16;
constexpr int kPushPullsPerClient = 2000;
constexpr int64_t kElements = 16;

class ExactAccountingTest : public ::testing::TestWithParam<bool> {};

TEST_P(ExactAccountingTest, SixteenClientsTimesTwoThousandPushPullsOfOnesEndAtMinus32000) {
  const bool streamed = GetParam();
  VariableStore store;
  PsServiceImpl service(&store, [](const std::string&) {});
  auto authorizer = std::make_shared<CallAuthorizer>(kToken);
  ServerOptions server_options;
  server_options.listen_address = "127.0.0.1:0";
  server_options.services = {&service};
  server_options.credentials = AuthorizingServerCredentials(authorizer);
  absl::StatusOr<RunningServer> server = StartServer(server_options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = "127.0.0.1:" + std::to_string(server->port);
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(1.0f);
  ASSERT_TRUE(store.CreateVariables({{"v", Tensor({kElements})}}, sgd).ok());

  GrpcPsClientOptions options;
  // Every push on the stream (a 64-byte gradient is past a 1-byte threshold), or none.
  options.stream_threshold_bytes = streamed ? 1 : (int64_t{1} << 62);
  SetClientSecurity({kToken, {Role::kWorker, 0}});
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(CreateGrpcPsClient(0, address, absl::Seconds(60), options));
  }
  SetClientSecurity({"a-wrong-token-for-this-ps-0123456789", {Role::kWorker, 1}});
  std::unique_ptr<PsClient> intruder = CreateGrpcPsClient(0, address, absl::Seconds(60), options);
  SetClientSecurity({});

  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::atomic<int> intruder_refused{0};
  std::thread intruding([&] {
    const std::vector<NamedTensor> gradient = {{"v", Tensor({kElements}, std::vector<float>(kElements, -1e3f))}};
    while (!done.load()) {
      absl::StatusOr<std::vector<Tensor>> answer = intruder->PushPull(gradient, 0);
      if (!answer.ok() && absl::IsUnauthenticated(answer.status())) intruder_refused.fetch_add(1);
      if (answer.ok()) failures.fetch_add(1);
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      const std::vector<NamedTensor> ones = {{"v", Tensor({kElements}, std::vector<float>(kElements, 1.0f))}};
      for (int i = 0; i < kPushPullsPerClient; ++i) {
        absl::StatusOr<std::vector<Tensor>> pulled = clients[c]->PushPull(ones, i);
        // What comes back is some whole number of updates, never more than all of them.
        if (!pulled.ok() || pulled->size() != 1 || (*pulled)[0].data()[0] > -1.0f ||
            (*pulled)[0].data()[0] < -kClients * kPushPullsPerClient) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  done.store(true);
  intruding.join();
  EXPECT_EQ(failures.load(), 0);

  std::vector<int64_t> versions;
  absl::StatusOr<std::vector<Tensor>> final_value = store.Pull({"v"}, &versions);
  ASSERT_TRUE(final_value.ok()) << final_value.status();
  for (float x : (*final_value)[0].values()) EXPECT_EQ(x, -32000.0f);
  EXPECT_EQ(versions.at(0), kClients * kPushPullsPerClient);
  EXPECT_EQ(store.num_pushes(), kClients * kPushPullsPerClient);
  // Every call of the job's clients passed; the intruder's were all refused.
  EXPECT_GT(intruder_refused.load(), 0);
  EXPECT_GE(authorizer->refused_unauthenticated(), intruder_refused.load());
  EXPECT_EQ(authorizer->refused_permission_denied(), 0);
  server->server->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(UnaryAndStreamed, ExactAccountingTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "PushPullStream" : "UnaryPushPull";
                         });

}  // namespace
}  // namespace pstrain
