// The worker service over real gRPC on a free port: the training chunk as a function,
// against requests no chief sends.

#include "worker/rpc/worker_service.h"

#include <memory>
#include <string>

#include "common/math/cpu_backend.h"
#include "common/rpc/grpc_util.h"
#include "gtest/gtest.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"
#include "worker/training_worker.h"

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
    worker_ = *std::move(worker);
    ASSERT_TRUE(RegisterTrainChunk(worker_.get(), &functions_).ok());
    auto running = StartServer({"127.0.0.1:0", {&service_}});
    ASSERT_TRUE(running.ok()) << running.status();
    server_ = std::move(running->server);
    stub_ = FunctionWorker::NewStub(CreateChannel("127.0.0.1:" + std::to_string(running->port)));
  }
  void TearDown() override { server_->Shutdown(); }

  // The chunk's status: the RPC's when it failed, else the one in the response.
  absl::Status RunFunction(const std::string& function, const std::string& arguments,
                           std::string* result = nullptr) {
    RunFunctionRequest request;
    request.set_function(function);
    request.set_arguments(arguments);
    RunFunctionResponse response;
    grpc::ClientContext context;
    SetTimeout(&context, absl::Seconds(10));
    absl::Status status = FromGrpcStatus(stub_->RunFunction(&context, request, &response), "w");
    if (!status.ok()) return status;
    if (result != nullptr) *result = response.result();
    return absl::Status(static_cast<absl::StatusCode>(response.code()), response.message());
  }
  absl::Status RunSteps(const RunStepsRequest& request) {
    return RunFunction(kTrainChunkFunction, request.SerializeAsString());
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
  std::unique_ptr<TrainingWorker> worker_;
  WorkerFunctions functions_;
  WorkerServiceImpl service_{&functions_, [](const std::string&) {}};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<FunctionWorker::Stub> stub_;
};

TEST_F(WorkerServiceTest, NegativeEpochStepsOrShardsAreInvalidArgument) {
  RunStepsRequest epoch = Good();
  epoch.set_epoch(-1);
  const absl::Status status = RunSteps(epoch);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("epoch -1 < 0"), std::string::npos) << status;
  RunStepsRequest steps = Good();
  steps.set_steps(-1);
  EXPECT_EQ(RunSteps(steps).code(), absl::StatusCode::kInvalidArgument);
  RunStepsRequest first = Good();
  first.set_first_step(-5);
  EXPECT_EQ(RunSteps(first).code(), absl::StatusCode::kInvalidArgument);
  RunStepsRequest shard = Good();
  shard.set_shard_index(3);
  EXPECT_EQ(RunSteps(shard).code(), absl::StatusCode::kInvalidArgument);
  RunStepsRequest no_ps = Good();
  no_ps.clear_ps_addresses();
  EXPECT_EQ(RunSteps(no_ps).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.num_pushes(), 0);
}

TEST_F(WorkerServiceTest, StatusSaysReadyWithTheChunk) {
  FunctionWorkerStatusRequest request;
  FunctionWorkerStatusResponse status;
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(10));
  ASSERT_TRUE(stub_->GetStatus(&context, request, &status).ok());
  EXPECT_TRUE(status.ready());
  EXPECT_FALSE(status.busy());
  EXPECT_EQ(status.backend(), "cpu");
  ASSERT_EQ(status.functions_size(), 1);
  EXPECT_EQ(status.functions(0), kTrainChunkFunction);
}

TEST_F(WorkerServiceTest, HostileCallsAreRefusedAndPushNothing) {
  // Arguments that are not a RunStepsRequest.
  EXPECT_TRUE(absl::IsInvalidArgument(RunFunction(kTrainChunkFunction, "\xff\xff\xff")));
  // A function the worker does not have.
  EXPECT_TRUE(absl::IsFailedPrecondition(RunFunction("pstrain.no_such_function", "")));
  // Arguments over the limit: refused as a call.
  const absl::Status big = RunFunction(
      kTrainChunkFunction, std::string(WorkerFunctions::kMaxArgumentsBytes + 1, '\0'));
  EXPECT_TRUE(absl::IsInvalidArgument(big)) << big;
  EXPECT_NE(big.message().find("exceed the limit"), std::string::npos) << big;
  EXPECT_EQ(store_.num_pushes(), 0);
}

}  // namespace
}  // namespace pstrain
