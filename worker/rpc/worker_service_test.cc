// The worker service over real gRPC on a free port, against requests no chief sends.

#include "worker/rpc/worker_service.h"

#include <memory>
#include <string>

#include "common/math/cpu_backend.h"
#include "common/rpc/grpc_util.h"
#include "gtest/gtest.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

constexpr char kJob[] = R"({
  "model": {"class_name": "Sequential", "config": {"name": "m", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
    {"class_name": "Dense", "config": {"name": "dense", "units": 3, "activation": "softmax"}}]}},
  "compile": {"optimizer": "sgd", "loss": "sparse_categorical_crossentropy"},
  "data": {"train": {"type": "synthetic", "samples": 64, "features": 4, "classes": 3}}})";

class WorkerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TrainingWorker>> worker = TrainingWorker::Create(
        kJob, ".", 0, CreateCpuBackend(),
        [this](int index, const std::string&) { return CreateLocalPsClient(index, &store_); });
    ASSERT_TRUE(worker.ok()) << worker.status();
    service_.SetWorker(*std::move(worker));
    auto running = StartServer({"127.0.0.1:0", {&service_}});
    ASSERT_TRUE(running.ok()) << running.status();
    server_ = std::move(running->server);
    stub_ = Worker::NewStub(CreateChannel("127.0.0.1:" + std::to_string(running->port)));
  }
  void TearDown() override { server_->Shutdown(); }

  grpc::Status RunSteps(const RunStepsRequest& request) {
    RunStepsResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(10));
    return stub_->RunSteps(&context, request, &response);
  }

  static RunStepsRequest Good() {
    RunStepsRequest request;
    request.set_steps(1);
    request.set_batch_size(8);
    request.set_num_shards(1);
    request.add_ps_addresses("in-process");
    return request;
  }

  VariableStore store_;
  WorkerServiceImpl service_{[](const std::string&) {}};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Worker::Stub> stub_;
};

TEST_F(WorkerServiceTest, NegativeEpochStepsOrShardsAreInvalidArgument) {
  RunStepsRequest epoch = Good();
  epoch.set_epoch(-1);
  const grpc::Status status = RunSteps(epoch);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("epoch -1 < 0"), std::string::npos)
      << status.error_message();
  RunStepsRequest steps = Good();
  steps.set_steps(-1);
  EXPECT_EQ(RunSteps(steps).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  RunStepsRequest first = Good();
  first.set_first_step(-5);
  EXPECT_EQ(RunSteps(first).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  RunStepsRequest shard = Good();
  shard.set_shard_index(3);
  EXPECT_EQ(RunSteps(shard).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  RunStepsRequest no_ps = Good();
  no_ps.clear_ps_addresses();
  EXPECT_EQ(RunSteps(no_ps).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(store_.num_pushes(), 0);
}

}  // namespace
}  // namespace pstrain
