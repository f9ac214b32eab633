// The ps service over real gRPC on a free port: the wire contract and its error codes.

#include "ps_server/rpc/ps_service.h"

#include "common/rpc/grpc_util.h"
#include "gtest/gtest.h"
#include "ps_server/rpc/grpc_ps_client.h"

namespace pstrain {
namespace {

class PsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto running = StartServer({"127.0.0.1:0", {&service_}});
    ASSERT_TRUE(running.ok()) << running.status();
    server_ = std::move(running->server);
    address_ = "127.0.0.1:" + std::to_string(running->port);
    client_ = CreateGrpcPsClient(0, address_, absl::Seconds(10));
    OptimizerConfig sgd;
    sgd.set_name("sgd");
    sgd.set_learning_rate(1);
    ASSERT_TRUE(client_->CreateVariables({{"w", Tensor({2, 2}, {1, 2, 3, 4})}}, sgd).ok());
  }
  void TearDown() override { server_->Shutdown(); }

  VariableStore store_;
  std::string shutdown_reason_;
  PsServiceImpl service_{&store_, [this](const std::string& r) { shutdown_reason_ = r; }};
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(PsServiceTest, PushPullAppliesAndReturnsNewValue) {
  auto values = client_->PushPull({{"w", Tensor({2, 2}, {1, 1, 1, 1})}}, 0);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(std::vector<float>((*values)[0].values().begin(), (*values)[0].values().end()),
            (std::vector<float>{0, 1, 2, 3}));
}

TEST_F(PsServiceTest, WrongShapeIsInvalidArgumentNamingThePsAndLeavesValue) {
  absl::Status status = client_->Push({{"w", Tensor({4}, {1, 1, 1, 1})}}, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message().rfind("ps task 0", 0), 0u) << status;
  auto values = client_->Pull({"w"});
  ASSERT_TRUE(values.ok());
  EXPECT_EQ((*values)[0].data()[3], 4);
}

TEST_F(PsServiceTest, UnknownVariableIsNotFound) {
  EXPECT_EQ(client_->Pull({"missing"}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PsServiceTest, MalformedTensorBytesAreInvalidArgument) {
  // A hostile client sends a gradient whose byte length does not match its shape.
  PushRequest request;
  Gradient* g = request.add_gradients();
  g->set_name("w");
  g->mutable_gradient()->set_dtype(DT_FLOAT);
  g->mutable_gradient()->add_shape(2);
  g->mutable_gradient()->add_shape(2);
  g->mutable_gradient()->set_content("abc");
  auto stub = ParameterServer::NewStub(CreateChannel(address_));
  PushResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(10));
  grpc::Status status = stub->Push(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ((*client_->Pull({"w"}))[0].data()[0], 1);
}

TEST_F(PsServiceTest, StatusListsVariablesAndShutdownCallsBack) {
  ASSERT_TRUE(client_->Push({{"w", Tensor({2, 2}, {0, 0, 0, 0})}}, 0).ok());
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->variables_size(), 1);
  EXPECT_EQ(status->variables(0).version(), 1);
  EXPECT_EQ(status->optimizer(), "sgd");
  ASSERT_TRUE(client_->Shutdown("test over").ok());
  EXPECT_EQ(shutdown_reason_, "test over");
}

TEST_F(PsServiceTest, ReadStateAndRestoreStateRoundTripOverTheWire) {
  ASSERT_TRUE(client_->Push({{"w", Tensor({2, 2}, {1, 1, 1, 1})}}, 0).ok());
  auto state = client_->ReadState({"w"});
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->size(), 1u);
  EXPECT_EQ((*state)[0].version, 1);
  EXPECT_EQ((*state)[0].iterations, 1);
  EXPECT_TRUE((*state)[0].slots.empty());  // plain SGD keeps none
  EXPECT_EQ((*state)[0].value.data()[3], 3);

  VariableSnapshot restored = (*state)[0];
  restored.value = Tensor({2, 2}, {9, 8, 7, 6});
  restored.iterations = 42;
  ASSERT_TRUE(client_->RestoreState({restored}).ok());
  auto after = client_->ReadState({});
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].value.data()[0], 9);
  EXPECT_EQ((*after)[0].iterations, 42);

  VariableSnapshot unknown_slot = restored;
  unknown_slot.slots.push_back({"momentum", Tensor({2, 2})});
  absl::Status status = client_->RestoreState({unknown_slot});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message().rfind("ps task 0", 0), 0u) << status;
  VariableSnapshot wrong_shape = restored;
  wrong_shape.value = Tensor({4});
  EXPECT_EQ(client_->RestoreState({wrong_shape}).code(), absl::StatusCode::kInvalidArgument);
  VariableSnapshot missing = restored;
  missing.name = "missing";
  EXPECT_EQ(client_->RestoreState({missing}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->ReadState({"missing"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*client_->Pull({"w"}))[0].data()[0], 9);  // the failed restores changed nothing
}

}  // namespace
}  // namespace pstrain
