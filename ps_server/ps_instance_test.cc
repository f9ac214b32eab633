// The ps as the daemon and a custom loop both start it (PsInstance), served on a real gRPC
// server and called through the real client: what its options promise reaches the service.

#include "ps_server/ps_instance.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_registry.h"
#include "common/rpc/grpc_util.h"
#include "common/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"
#include "ps_server/rpc/grpc_ps_client.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

PsInstance::Options ValidOptions(MetricsRegistry* registry) {
  PsInstance::Options options;
  options.on_shutdown = [](const std::string&) {};
  options.registry = registry;
  return options;
}

TEST(PsInstanceTest, OptionsItCannotServeAreRefused) {
  MetricsRegistry registry;
  PsInstance::Options no_callback = ValidOptions(&registry);
  no_callback.on_shutdown = nullptr;
  PsInstance::Options no_registry = ValidOptions(nullptr);
  PsInstance::Options negative_workers = ValidOptions(&registry);
  negative_workers.num_workers = -1;
  PsInstance::Options negative_memory = ValidOptions(&registry);
  negative_memory.request_memory_bytes = -5;
  for (const PsInstance::Options& options :
       {no_callback, no_registry, negative_workers, negative_memory}) {
    absl::StatusOr<std::unique_ptr<PsInstance>> ps = PsInstance::Create(options);
    EXPECT_EQ(ps.status().code(), absl::StatusCode::kInvalidArgument) << ps.status();
  }
  // Nothing was registered by the refused ones.
  EXPECT_THAT(registry.TextFormat(), ::testing::Not(HasSubstr("pstrain_ps_")));
}

// Served and called as a cluster does: the pushes apply, its metrics land in the given
// registry, the Shutdown RPC reaches the callback, and it has no checkpoint shards.
class PsInstanceServedTest : public ::testing::Test {
 protected:
  void Serve(PsInstance::Options options) {
    options.on_shutdown = [this](const std::string& reason) {
      absl::MutexLock lock(&mu_);
      shutdown_reason_ = reason;
    };
    options.registry = &registry_;
    absl::StatusOr<std::unique_ptr<PsInstance>> ps = PsInstance::Create(std::move(options));
    ASSERT_TRUE(ps.ok()) << ps.status();
    ps_ = *std::move(ps);
    absl::StatusOr<RunningServer> running = StartServer({"127.0.0.1:0", {ps_->service()}});
    ASSERT_TRUE(running.ok()) << running.status();
    server_ = std::move(running->server);
    client_ = CreateGrpcPsClient(0, absl::StrCat("127.0.0.1:", running->port), absl::Seconds(10));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  std::string ShutdownReason() {
    absl::MutexLock lock(&mu_);
    return shutdown_reason_;
  }

  MetricsRegistry registry_;
  // Written on the server's handler thread, read on the test's.
  absl::Mutex mu_;
  std::string shutdown_reason_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PsInstance> ps_;  // Before the server: outlives it.
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(PsInstanceServedTest, AppliesPushesCountsThemAndShutsDownOnTheRpc) {
  PsInstance::Options options;
  options.num_workers = 2;
  ASSERT_NO_FATAL_FAILURE(Serve(std::move(options)));
  EXPECT_FALSE(ps_->has_checkpoint_shards());
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(1);
  ASSERT_TRUE(client_->CreateVariables({{"w", Tensor({2}, {1, 2})}}, sgd).ok());
  absl::StatusOr<std::vector<Tensor>> pushed = client_->PushPull({{"w", Tensor({2}, {1, 1})}}, 0);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  ASSERT_EQ(pushed->size(), 1u);
  EXPECT_EQ((*pushed)[0].data()[0], 0.0f);
  EXPECT_EQ((*pushed)[0].data()[1], 1.0f);

  EXPECT_EQ(ps_->num_pushes(), 1);
  EXPECT_EQ(ps_->num_pulls(), 1);  // the pull half of the push-pull
  const std::string text = registry_.TextFormat();
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_pushes_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_variables 1\n"));

  absl::StatusOr<PsStatusResponse> status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_FALSE(status->checkpoint_shards());
  EXPECT_EQ(status->pushes(), 1);

  ASSERT_TRUE(client_->Shutdown("job done").ok());
  EXPECT_EQ(ShutdownReason(), "job done");
}

TEST_F(PsInstanceServedTest, CheckpointDirGivesItItsShards) {
  PsInstance::Options options;
  options.checkpoint_dir = ::testing::TempDir();
  ASSERT_NO_FATAL_FAILURE(Serve(std::move(options)));
  EXPECT_TRUE(ps_->has_checkpoint_shards());
  absl::StatusOr<PsStatusResponse> status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->checkpoint_shards());
}

}  // namespace
}  // namespace pstrain
