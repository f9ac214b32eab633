// The ps service over real gRPC on a free port: the wire contract and its error codes.

#include "ps_server/rpc/ps_service.h"

#include <atomic>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_util.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "common/metrics/metrics_registry.h"
#include "common/wire_precision.h"
#include "google/protobuf/descriptor.h"
#include "proto/ps.grpc.pb.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/push_pull_stream.h"

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

  std::string ShutdownReason() {
    absl::MutexLock lock(&mu_);
    return shutdown_reason_;
  }

  VariableStore store_;
  // Written by the callback on the server's handler thread, read on the test's thread:
  // that the Shutdown call has returned orders the two only through the network, which
  // TSan cannot see (it reported the string racing).
  absl::Mutex mu_;
  std::string shutdown_reason_ ABSL_GUARDED_BY(mu_);
  PsServiceImpl service_{&store_, [this](const std::string& r) {
                           absl::MutexLock lock(&mu_);
                           shutdown_reason_ = r;
                         }};
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<PsClient> client_;
};

TEST(PsServiceMethodIndexTest, EachIndexNamesItsMethodInTheServiceDescriptor) {
  // The handlers registered by index serve whatever method stands at that position: a
  // reordered proto/ps.proto would route calls to the wrong handler.
  const google::protobuf::ServiceDescriptor* service =
      PullRequest::descriptor()->file()->FindServiceByName("ParameterServer");
  ASSERT_NE(service, nullptr);
  const std::pair<int, const char*> expected[] = {
      {kPullMethodIndex, "Pull"},         {kPushMethodIndex, "Push"},
      {kPushPullMethodIndex, "PushPull"}, {kPullRowsMethodIndex, "PullRows"},
      {kPushRowsMethodIndex, "PushRows"}, {kPushPullStreamMethodIndex, "PushPullStream"}};
  for (const auto& [index, name] : expected) {
    ASSERT_LT(index, service->method_count()) << name;
    EXPECT_EQ(service->method(index)->name(), name) << "method index " << index;
  }
}

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
  EXPECT_EQ(ShutdownReason(), "test over");
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

TEST_F(PsServiceTest, LargeTensorStreamsWithDefaultOptions) {
  // Above the default stream threshold, in several default-sized chunks plus a partial one.
  const int64_t n = 3 * kDefaultPushPullChunkBytes / 4 + 5;
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(1);
  ASSERT_TRUE(client_->CreateVariables({{"big", Tensor({n}, std::vector<float>(n, 5))}}, sgd).ok());
  std::vector<int64_t> versions;
  auto values = client_->PushPull({{"big", Tensor({n}, std::vector<float>(n, 2))}}, PushContext(),
                                  &versions);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(std::vector<float>((*values)[0].values().begin(), (*values)[0].values().end()),
            std::vector<float>(n, 3));
  EXPECT_EQ(versions, std::vector<int64_t>{1});
  EXPECT_EQ(store_.num_pushes(), 1);
}

// The streamed push-and-pull (PushPullStream): tiny chunks so that small tensors cross
// every chunk boundary; the client chunks by 16 bytes and the ps by 10, so chunks also
// split floats.
constexpr int64_t kClientChunk = 16;
constexpr int64_t kPsChunk = 10;

std::vector<float> Iota(int64_t n, float start) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

class PsStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_.set_chunk_bytes(kPsChunk);
    auto running = StartServer({"127.0.0.1:0", {&service_}});
    ASSERT_TRUE(running.ok()) << running.status();
    server_ = std::move(running->server);
    address_ = "127.0.0.1:" + std::to_string(running->port);
    GrpcPsClientOptions options;
    options.stream_threshold_bytes = 0;  // every push-and-pull streams
    options.chunk_bytes = kClientChunk;
    client_ = CreateGrpcPsClient(0, address_, absl::Seconds(10), options);
  }
  void TearDown() override { server_->Shutdown(); }

  void Create(std::vector<NamedTensor> variables, ConsistencyConfig consistency = {}) {
    OptimizerConfig sgd;
    sgd.set_name("sgd");
    sgd.set_learning_rate(1);
    ASSERT_TRUE(client_->CreateVariables(std::move(variables), sgd, consistency).ok());
  }

  std::vector<float> Value(const std::string& name, int64_t* version = nullptr) {
    std::vector<int64_t> versions;
    auto values = client_->Pull({name}, &versions);
    EXPECT_TRUE(values.ok()) << values.status();
    if (!values.ok()) return {};
    if (version != nullptr) *version = versions[0];
    return std::vector<float>((*values)[0].values().begin(), (*values)[0].values().end());
  }

  // A raw stream with pstrain's slice messages, for hostile input.
  using Stream = grpc::ClientReaderWriter<PushPullChunkIn, PushPullChunkOut>;
  std::unique_ptr<Stream> OpenStream(grpc::ClientContext* context) {
    if (channel_ == nullptr) channel_ = CreateChannel(address_);
    SetTimeout(context, absl::Seconds(10));
    const grpc::internal::RpcMethod method(kPushPullStreamMethod,
                                           grpc::internal::RpcMethod::BIDI_STREAMING);
    return std::unique_ptr<Stream>(
        grpc::internal::ClientReaderWriterFactory<PushPullChunkIn, PushPullChunkOut>::Create(
            channel_.get(), method, context));
  }

  static PushPullChunkIn Header(const std::string& name, std::vector<int64_t> shape) {
    PushPullChunkIn m;
    Gradient* g = m.fields().mutable_push()->add_gradients();
    g->set_name(name);
    g->mutable_gradient()->set_dtype(DT_FLOAT);
    for (int64_t d : shape) g->mutable_gradient()->add_shape(d);
    return m;
  }
  static PushPullChunkIn Chunk(int tensor, int64_t offset, const std::vector<float>& bytes_of,
                               int64_t begin, int64_t size) {
    PushPullChunkIn m;
    m.fields().set_tensor(tensor);
    m.fields().set_offset(offset);
    m.SetPayloadCopy(reinterpret_cast<const char*>(bytes_of.data()) + begin, size);
    return m;
  }
  static PushPullChunkIn Commit(PushPullChunkIn m) {
    m.fields().set_commit(true);
    return m;
  }
  // Writes `messages`, half-closes, reads what comes back, returns the final status.
  grpc::Status Run(std::vector<PushPullChunkIn> messages) {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = OpenStream(&context);
    for (const PushPullChunkIn& m : messages) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
    PushPullChunkOut ignored;
    while (stream->Read(&ignored)) {
    }
    return stream->Finish();
  }

  VariableStore store_;
  PsServiceImpl service_{&store_, [](const std::string&) {}};
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(PsStreamTest, EveryChunkBoundarySizeRoundTrips) {
  // 0, 1 float, chunk-1, chunk, chunk+1 (in floats of the 16-byte client chunk) and
  // several chunks, all in one push-and-pull.
  const std::vector<int64_t> sizes = {0, 1, 3, 4, 5, 12, 13, 1000};
  std::vector<NamedTensor> variables, gradients;
  for (int64_t n : sizes) {
    const std::string name = "v" + std::to_string(n);
    variables.push_back({name, Tensor({n}, Iota(n, 100))});
    gradients.push_back({name, Tensor({n}, Iota(n, 1))});
  }
  Create(variables);
  std::vector<int64_t> versions;
  PushContext context;
  auto values = client_->PushPull(gradients, context, &versions);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ((*values)[i].shape(), std::vector<int64_t>{sizes[i]});
    EXPECT_EQ(std::vector<float>((*values)[i].values().begin(), (*values)[i].values().end()),
              std::vector<float>(sizes[i], 99.0f))
        << sizes[i];  // (100 + k) - (1 + k)
    EXPECT_EQ(versions[i], 1);
  }
}

TEST_F(PsStreamTest, ProtobufClientReadsAndWritesTheSameWire) {
  // The generated stub (ordinary protobuf messages) talks to the slice-based handler.
  Create({{"w", Tensor({2, 3}, Iota(6, 10))}});
  auto stub = ParameterServer::NewStub(CreateChannel(address_));
  grpc::ClientContext context;
  SetTimeout(&context, absl::Seconds(10));
  auto stream = stub->PushPullStream(&context);
  PushPullChunkRequest header;
  Gradient* g = header.mutable_push()->add_gradients();
  g->set_name("w");
  g->mutable_gradient()->set_dtype(DT_FLOAT);
  g->mutable_gradient()->add_shape(2);
  g->mutable_gradient()->add_shape(3);
  ASSERT_TRUE(stream->Write(header));
  const std::vector<float> ones(6, 1.0f);
  PushPullChunkRequest chunk;
  chunk.set_data(reinterpret_cast<const char*>(ones.data()), 24);
  chunk.set_commit(true);
  ASSERT_TRUE(stream->Write(chunk, grpc::WriteOptions().set_last_message()));
  std::string content;
  PushPullChunkResponse response;
  bool first = true;
  while (stream->Read(&response)) {
    if (first) {
      ASSERT_TRUE(response.has_pull());
      EXPECT_EQ(response.pull().versions(0), 1);
      first = false;
    }
    EXPECT_EQ(response.offset(), static_cast<int64_t>(content.size()));
    content += response.data();
  }
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(content.size(), 24u);
  std::vector<float> got(6);
  std::memcpy(got.data(), content.data(), 24);
  EXPECT_EQ(got, Iota(6, 9));
}

TEST_F(PsStreamTest, HostileStreamsAreInvalidArgumentAndChangeNothing) {
  Create({{"w", Tensor({8}, Iota(8, 0))}});
  const std::vector<float> g(8, 1.0f);
  std::vector<std::pair<std::string, std::vector<PushPullChunkIn>>> cases;
  cases.push_back({"no header", {Chunk(0, 0, g, 0, 32)}});
  cases.push_back({"empty stream", {}});
  {
    std::vector<PushPullChunkIn> m;
    m.push_back(Header("w", {8}));
    m.push_back(Chunk(0, 0, g, 0, 16));
    m.push_back(Chunk(0, 20, g, 20, 12));  // bytes 16..20 missing
    cases.push_back({"missing chunk", std::move(m)});
  }
  {
    std::vector<PushPullChunkIn> m;
    m.push_back(Header("w", {8}));
    m.push_back(Chunk(0, 0, g, 0, 16));
    m.push_back(Chunk(0, 0, g, 0, 16));
    cases.push_back({"repeated chunk", std::move(m)});
  }
  {
    std::vector<PushPullChunkIn> m;
    m.push_back(Header("w", {8}));
    m.push_back(Commit(Chunk(0, 0, g, 0, 28)));
    cases.push_back({"incomplete at the commit", std::move(m)});
  }
  {
    std::vector<PushPullChunkIn> m;
    m.push_back(Header("w", {8}));
    m.push_back(Chunk(0, 0, g, 0, 32));
    m.push_back(Chunk(0, 32, g, 0, 4));
    cases.push_back({"past the end", std::move(m)});
  }
  {
    std::vector<PushPullChunkIn> m;
    m.push_back(Header("w", {8}));
    m.push_back(Chunk(1, 0, g, 0, 32));
    cases.push_back({"unknown tensor index", std::move(m)});
  }
  {
    std::vector<PushPullChunkIn> m;
    m.push_back(Header("w", {8}));
    m.push_back(Chunk(0, 0, g, 0, 32));
    m.push_back(Header("w", {8}));
    cases.push_back({"second header", std::move(m)});
  }
  {
    PushPullChunkIn h = Header("w", {8});
    h.fields().mutable_push()->mutable_gradients(0)->mutable_gradient()->set_content("abcd");
    cases.push_back({"inline content", {}});
    cases.back().second.push_back(std::move(h));
  }
  {
    PushPullChunkIn h = Header("w", {-8});
    cases.push_back({"negative shape", {}});
    cases.back().second.push_back(std::move(h));
  }
  {
    PushPullChunkIn h = Header("w", {8});
    h.fields().mutable_push()->mutable_gradients(0)->mutable_gradient()->set_dtype(DT_INT64);
    cases.push_back({"wrong dtype", {}});
    cases.back().second.push_back(std::move(h));
  }
  {
    std::vector<PushPullChunkIn> m;
    m.push_back(Header("w", {2, 4}));  // right size, wrong shape: the store refuses it
    m.push_back(Commit(Chunk(0, 0, g, 0, 32)));
    cases.push_back({"wrong shape", std::move(m)});
  }
  {
    // Many huge shapes and no bytes: refused when the stream ends, nothing reserved for
    // them up front.
    PushPullChunkIn h = Header("w", {int64_t{1} << 40});
    for (int i = 0; i < 1000; ++i) {
      Gradient* g = h.fields().mutable_push()->add_gradients();
      g->set_name("w");
      g->mutable_gradient()->set_dtype(DT_FLOAT);
      g->mutable_gradient()->add_shape(int64_t{1} << 40);
    }
    cases.push_back({"huge declared shapes", {}});
    cases.back().second.push_back(std::move(h));
  }
  for (auto& [what, messages] : cases) {
    const grpc::Status status = Run(std::move(messages));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
    EXPECT_FALSE(status.error_message().empty()) << what;
  }
  int64_t version = -1;
  EXPECT_EQ(Value("w", &version), Iota(8, 0));
  EXPECT_EQ(version, 0);
}

TEST_F(PsStreamTest, UnknownVariableIsNotFoundNamingThePs) {
  Create({{"w", Tensor({4})}});
  auto values = client_->PushPull({{"nope", Tensor({4}, {1, 1, 1, 1})}}, 0);
  EXPECT_EQ(values.status().code(), absl::StatusCode::kNotFound) << values.status();
  EXPECT_EQ(values.status().message().rfind("ps task 0", 0), 0u) << values.status();
  // Also when it comes with a good gradient: all-or-nothing.
  values = client_->PushPull({{"w", Tensor({4}, {1, 1, 1, 1})}, {"nope", Tensor({4})}}, 0);
  EXPECT_EQ(values.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Value("w"), std::vector<float>(4, 0.0f));
}

TEST_F(PsStreamTest, ClientPastItsDeadlineChangesNothing) {
  Create({{"w", Tensor({8})}});
  grpc::ClientContext context;
  if (channel_ == nullptr) channel_ = CreateChannel(address_);
  SetTimeout(&context, absl::Milliseconds(300));
  const grpc::internal::RpcMethod method(kPushPullStreamMethod,
                                         grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<Stream> stream(
      grpc::internal::ClientReaderWriterFactory<PushPullChunkIn, PushPullChunkOut>::Create(
          channel_.get(), method, &context));
  const std::vector<float> g(8, 1.0f);
  stream->Write(Header("w", {8}));
  stream->Write(Chunk(0, 0, g, 0, 32));  // everything, but never half-closed
  absl::SleepFor(absl::Seconds(1));
  PushPullChunkOut ignored;
  while (stream->Read(&ignored)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  int64_t version = -1;
  EXPECT_EQ(Value("w", &version), std::vector<float>(8, 0.0f));
  EXPECT_EQ(version, 0);
}

TEST_F(PsStreamTest, PullsRacingStreamedPushesNeverSeeATornValue) {
  // Every push subtracts 1 from every element, so any value a whole update produced is
  // uniform; a half-applied one would not be.
  constexpr int64_t kElements = 300;  // 75 client chunks, 120 ps chunks
  constexpr int kPushes = 40;
  Create({{"w", Tensor({kElements})}});
  std::atomic<bool> torn{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      GrpcPsClientOptions options;
      options.stream_threshold_bytes = 0;
      options.chunk_bytes = kClientChunk;
      auto client = CreateGrpcPsClient(0, address_, absl::Seconds(10), options);
      for (int i = 0; i < kPushes; ++i) {
        auto values = client->PushPull({{"w", Tensor({kElements}, std::vector<float>(kElements, 1))}}, i);
        ASSERT_TRUE(values.ok()) << values.status();
        const auto v = (*values)[0].values();
        for (float x : v) if (x != v[0]) torn = true;
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    const std::vector<float> v = Value("w");
    for (float x : v) if (x != v[0]) torn = true;
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(torn);
  EXPECT_EQ(Value("w"), std::vector<float>(kElements, -2.0f * kPushes));  // no lost update
}

TEST_F(PsStreamTest, StreamedPushPullEqualsTheUnaryPath) {
  // Two identical variables, one pushed through the stream (its gradient reassembled from
  // chunks that split floats), the other through the unary call: same values, versions.
  constexpr int64_t kElements = 37;
  OptimizerConfig adam;
  adam.set_name("adam");
  adam.set_learning_rate(0.1f);
  ASSERT_TRUE(client_
                  ->CreateVariables({{"a", Tensor({kElements}, Iota(kElements, -5))},
                                     {"b", Tensor({kElements}, Iota(kElements, -5))}},
                                    adam)
                  .ok());
  GrpcPsClientOptions unary_options;
  unary_options.stream_threshold_bytes = int64_t{1} << 40;
  auto unary = CreateGrpcPsClient(0, address_, absl::Seconds(10), unary_options);
  for (int step = 0; step < 3; ++step) {
    const Tensor g({kElements}, Iota(kElements, static_cast<float>(step) - 10));
    std::vector<int64_t> streamed_versions, unary_versions;
    auto streamed = client_->PushPull({{"a", g}}, PushContext(), &streamed_versions);
    auto direct = unary->PushPull({{"b", g}}, PushContext(), &unary_versions);
    ASSERT_TRUE(streamed.ok()) << streamed.status();
    ASSERT_TRUE(direct.ok()) << direct.status();
    EXPECT_EQ(std::vector<float>((*streamed)[0].values().begin(), (*streamed)[0].values().end()),
              std::vector<float>((*direct)[0].values().begin(), (*direct)[0].values().end()));
    EXPECT_EQ(streamed_versions, unary_versions);
    EXPECT_EQ(streamed_versions, std::vector<int64_t>{step + 1});
  }
  EXPECT_EQ(Value("a"), Value("b"));
}

// A job's "wire_dtype": 16-bit gradients are widened on the ps, the values come back
// rounded, over the stream and the unary call alike; the ps's float32 state is what a
// float32 push of the rounded gradient makes, and half the bytes move.
TEST_F(PsStreamTest, SixteenBitPushPullsCarryHalfTheBytes) {
  MetricsRegistry registry;
  PsMetrics metrics(&registry, &store_);
  service_.set_metrics(&metrics);
  constexpr int64_t kElements = 37;  // chunks of 16 and 10 bytes split elements
  GrpcPsClientOptions unary_options;
  unary_options.stream_threshold_bytes = int64_t{1} << 40;
  auto unary = CreateGrpcPsClient(0, address_, absl::Seconds(10), unary_options);
  std::vector<float> gradient(kElements);
  for (int64_t i = 0; i < kElements; ++i) gradient[i] = 0.1f + static_cast<float>(i) / 7.0f;
  for (WirePrecision precision : {WirePrecision::kBfloat16, WirePrecision::kFloat16}) {
    SCOPED_TRACE(std::string(WirePrecisionName(precision)));
    for (PsClient* client : {client_.get(), unary.get()}) {
      SCOPED_TRACE(client == unary.get() ? "unary" : "streamed");
      const std::string reference = absl::StrCat("f32_", WirePrecisionName(precision),
                                                 client == unary.get() ? "_unary" : "_stream");
      const std::string wire = reference + "_16";
      Create({{reference, Tensor({kElements}, Iota(kElements, -5))},
              {wire, Tensor({kElements}, Iota(kElements, -5))}});
      // float32 push of the rounded gradient...
      std::vector<float> rounded = gradient;
      RoundForWire(precision, absl::MakeSpan(rounded));
      auto exact = unary->PushPull({{reference, Tensor({kElements}, rounded)}}, PushContext(),
                                   nullptr);
      ASSERT_TRUE(exact.ok()) << exact.status();
      const int64_t before = client->GetStatus()->received_bytes();
      // ...and the 16-bit push of the gradient itself.
      PushContext context;
      context.precision = precision;
      auto values = client->PushPull({{wire, Tensor({kElements}, gradient)}}, context, nullptr);
      ASSERT_TRUE(values.ok()) << values.status();
      EXPECT_EQ(client->GetStatus()->received_bytes() - before, kElements * 2);
      EXPECT_EQ(Value(wire), Value(reference));  // the ps's float32 values
      std::vector<float> answered = Value(reference);
      RoundForWire(precision, absl::MakeSpan(answered));
      EXPECT_EQ(std::vector<float>((*values)[0].values().begin(), (*values)[0].values().end()),
                answered);
      EXPECT_NE(answered, Value(reference));  // the rounding shows: the test can fail
    }
  }
  service_.set_metrics(nullptr);
}

// A 16-bit push that does not add up, or asks its answer in a dtype that is not a float,
// changes nothing.
TEST_F(PsStreamTest, MalformedSixteenBitPushesChangeNothing) {
  Create({{"w", Tensor({4}, {1, 2, 3, 4})}});
  GrpcPsClientOptions unary_options;
  unary_options.stream_threshold_bytes = int64_t{1} << 40;
  auto unary = CreateGrpcPsClient(0, address_, absl::Seconds(10), unary_options);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<ParameterServer::Stub> stub =
      ParameterServer::NewStub(CreateChannel(address_));
  PushPullRequest request;
  Gradient* g = request.mutable_push()->add_gradients();
  g->set_name("w");
  TensorToWireProto(Tensor({4}, {1, 1, 1, 1}), WirePrecision::kBfloat16, g->mutable_gradient());
  g->mutable_gradient()->mutable_content()->pop_back();  // 7 bytes for 4 bfloat16s
  PushPullResponse response;
  grpc::Status status = stub->PushPull(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("DT_BFLOAT16 needs 8 bytes"), std::string::npos)
      << status.error_message();
  TensorToWireProto(Tensor({4}, {1, 1, 1, 1}), WirePrecision::kBfloat16, g->mutable_gradient());
  request.mutable_push()->set_pull_dtype(DT_INT64);
  grpc::ClientContext again;
  again.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  status = stub->PushPull(&again, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("values asked in"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(Value("w"), (std::vector<float>{1, 2, 3, 4}));
}

// Two workers push streamed gradients in lockstep; the ps applies their mean once per
// version (sync) or each one (bounded staleness), and the total is exact.
void ExactAccounting(PsStreamTest* test, const std::string& address, bool sync) {
  constexpr int64_t kElements = 50;
  constexpr int kSteps = 10;
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      GrpcPsClientOptions options;
      options.stream_threshold_bytes = 0;
      options.chunk_bytes = kClientChunk;
      auto client = CreateGrpcPsClient(0, address, absl::Seconds(30), options);
      int64_t version = 0;
      for (int step = 0; step < kSteps; ++step) {
        PushContext context;
        context.worker = "worker " + std::to_string(w);
        context.step = step;
        if (sync) context.versions = {version};
        std::vector<int64_t> versions;
        auto values = client->PushPull(
            {{"w", Tensor({kElements}, std::vector<float>(kElements, 1.0f))}}, context, &versions);
        ASSERT_TRUE(values.ok()) << values.status();
        version = versions[0];
      }
    });
  }
  for (auto& t : threads) t.join();
  (void)test;
}

TEST_F(PsStreamTest, SyncModeStreamedPushesAreAppliedOncePerStep) {
  ConsistencyConfig sync;
  sync.set_mode(CONSISTENCY_SYNC);
  sync.set_replicas_to_aggregate(2);
  sync.set_timeout_ms(30000);
  Create({{"w", Tensor({50})}}, sync);
  ExactAccounting(this, address_, /*sync=*/true);
  int64_t version = -1;
  EXPECT_EQ(Value("w", &version), std::vector<float>(50, -10.0f));  // mean of 1s, 10 times
  EXPECT_EQ(version, 10);
}

TEST_F(PsStreamTest, BoundedStalenessStreamedPushesAllCount) {
  ConsistencyConfig bounded;
  bounded.set_mode(CONSISTENCY_BOUNDED_STALENESS);
  bounded.set_staleness(1);
  bounded.set_timeout_ms(30000);
  Create({{"w", Tensor({50})}}, bounded);
  ExactAccounting(this, address_, /*sync=*/false);
  int64_t version = -1;
  EXPECT_EQ(Value("w", &version), std::vector<float>(50, -20.0f));
  EXPECT_EQ(version, 20);
}

}  // namespace
}  // namespace pstrain
