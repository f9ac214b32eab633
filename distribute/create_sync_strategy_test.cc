#include "distribute/create_sync_strategy.h"

#include <string>

#include "absl/status/status.h"
#include "common/cluster_spec.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(CreateSyncStrategyTest, DefaultIsOneReplicaOnTheDeviceAsked) {
  SyncStrategyOptions options;
  options.kind = StrategyKind::kDefault;
  SyncStrategySetup setup;
  ASSERT_TRUE(CreateSyncStrategy(options, &setup).ok());
  EXPECT_EQ(setup.strategy->name(), "default");
  EXPECT_EQ(setup.strategy->num_replicas_in_sync(), 1);
  EXPECT_EQ(setup.ring, nullptr);
  absl::StatusOr<std::unique_ptr<Backend>> backend = setup.MakeBackend(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_NE(*backend, nullptr);
}

TEST(CreateSyncStrategyTest, MirroredMakesOneBackendPerReplica) {
  SyncStrategyOptions options;
  options.kind = StrategyKind::kMirrored;
  options.devices = "cpu:0,cpu:1";
  SyncStrategySetup setup;
  ASSERT_TRUE(CreateSyncStrategy(options, &setup).ok());
  EXPECT_EQ(setup.strategy->name(), "mirrored");
  EXPECT_EQ(setup.strategy->num_replicas_in_sync(), 2);
  EXPECT_EQ(setup.devices, (std::vector<std::string>{"cpu:0", "cpu:1"}));
  for (int replica = 0; replica < 2; ++replica) {
    absl::StatusOr<std::unique_ptr<Backend>> backend = setup.MakeBackend(replica);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_NE(*backend, nullptr);
  }
}

void ExpectRefused(const SyncStrategyOptions& options, const std::string& says) {
  SyncStrategySetup setup;
  const absl::Status status = CreateSyncStrategy(options, &setup);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(says), std::string::npos) << status;
  EXPECT_EQ(setup.strategy, nullptr);
  EXPECT_EQ(setup.ring, nullptr);
}

TEST(CreateSyncStrategyTest, WhatItCannotMakeIsRefusedNamingWhy) {
  SyncStrategyOptions ps;
  ps.kind = StrategyKind::kParameterServer;
  ExpectRefused(ps, "parameter_server is not a synchronous strategy");

  SyncStrategyOptions bad_devices;
  bad_devices.kind = StrategyKind::kMirrored;
  bad_devices.devices = "gpu:0";
  ExpectRefused(bad_devices, "is not cpu:N or cuda:N");

  SyncStrategyOptions bad_device;
  bad_device.kind = StrategyKind::kDefault;
  bad_device.device = "tpu";
  ExpectRefused(bad_device, "device tpu");

  // A ps task has no place in the ring; nothing is served.
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      R"({"cluster":{"worker":["localhost:1","localhost:2"],"ps":["localhost:3"]},)"
      R"("task":{"type":"ps","index":0}})");
  ASSERT_TRUE(config.ok()) << config.status();
  SyncStrategyOptions ps_task;
  ps_task.kind = StrategyKind::kMultiWorkerMirrored;
  ps_task.config = *config;
  bool served = false;
  ps_task.serve = [&served](grpc::Service*, const std::string&) -> absl::StatusOr<RunningServer> {
    served = true;
    return RunningServer();
  };
  ExpectRefused(ps_task, "multi_worker_mirrored runs on chief and worker tasks, not ps:0");
  EXPECT_FALSE(served);
}

}  // namespace
}  // namespace pstrain
