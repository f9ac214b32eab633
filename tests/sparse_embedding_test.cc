// A worker's row-sparse Embedding (ps_server/client/sparse_embedding.h) against real ps stores: the
// weights equal those of dense training, and a step's bytes on the wire, counted by the
// ps's own metrics behind its real gRPC service, grow with the rows a batch touches, not
// with the table.

#include "ps_server/client/sparse_embedding.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/math/cpu_backend.h"
#include "common/rpc/grpc_util.h"
#include "common/sharding/shard_layout.h"
#include "common/sharding/test_placement.h"
#include "gtest/gtest.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"
#include "ps_server/client/ps_trainer.h"

namespace pstrain {
namespace {

// 4 ids per example -> Embedding(rows, 8) -> mean over the 4 -> Dense(3, softmax).
std::string ModelJson(int64_t rows) {
  return absl::StrCat(R"({"class_name": "Sequential", "config": {"layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": )",
                      rows, R"(, "output_dim": 8}},
    {"class_name": "GlobalAveragePooling1D", "config": {"name": "pool"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})");
}

// A batch of n examples whose ids come from [0, id_range) (often repeated: id_range is
// small), labelled by the first id mod 3.
void MakeBatch(int n, int64_t id_range, uint32_t seed, Tensor* x, Tensor* y) {
  *x = Tensor({n, 4});
  *y = Tensor({n});
  uint32_t state = seed;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < 4; ++j) {
      state = state * 1664525u + 1013904223u;
      x->data()[i * 4 + j] = static_cast<float>((state >> 8) % id_range);
    }
    y->data()[i] = static_cast<float>(static_cast<int64_t>(x->data()[i * 4]) % 3);
  }
}

// A model on `num_ps` ps tasks, every variable cut into `num_shards` row shards placed
// round-robin, each store holding its shards' rows of the initial values for seed 5.
struct Cluster {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  std::unique_ptr<Model> model;
  std::vector<VariablePlacementEntry> placement;
  std::vector<std::vector<NamedTensor>> initial_by_ps;

  Cluster(int64_t rows, int num_ps, int num_shards) {
    auto built = Model::FromKerasJsonText(ModelJson(rows), backend.get());
    EXPECT_TRUE(built.ok()) << built.status();
    model = *std::move(built);
    EXPECT_TRUE(model->SetLoss(LossConfig{}).ok());
    std::vector<VariableShape> shapes;
    for (const VariableSpec& v : model->variables()) shapes.push_back({v.name, v.shape});
    placement = RoundRobinShardsForTest(shapes, num_ps, num_shards);
    auto layout = ResolveLayout(shapes, placement, num_ps);
    EXPECT_TRUE(layout.ok()) << layout.status();
    std::vector<Tensor> initial = model->InitialValues(5);
    initial_by_ps.resize(num_ps);
    for (size_t i = 0; i < layout->size(); ++i) {
      for (const VariablePlacementEntry& shard : (*layout)[i].shards) {
        initial_by_ps[shard.ps_index()].push_back({shard.name(), *SliceShard(initial[i], shard)});
      }
    }
  }
};

OptimizerConfig Sgd() {
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(0.5f);
  return sgd;
}

TEST(RenumberBatchTest, DistinctIdsAscendingAndTheBatchInTheirIndices) {
  auto rows = RenumberBatch(Tensor({2, 3}, {9, 3, 9, 0, 3, 7}), 10);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->ids, (std::vector<int64_t>{0, 3, 7, 9}));
  EXPECT_EQ(rows->local_x.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::vector<float>(rows->local_x.values().begin(), rows->local_x.values().end()),
            (std::vector<float>{3, 1, 3, 0, 1, 2}));
  for (float bad : {10.0f, -1.0f, 2.5f}) {
    EXPECT_EQ(RenumberBatch(Tensor({1}, {bad}), 10).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// The same batches trained densely (every step the whole table) and by
// rows, each from the same initial values on stores of their own, a table split into 3
// shards over 2 ps: with SGD every value on every ps is bitwise the same. The compact
// model's forward pass reads the same rows, its backward pass sums repeated ids in the
// same order into one compact row, and the ps's SGD on a row is the dense update's
// arithmetic (the dense update leaves a zero-gradient row exactly as it was).
TEST(SparseEmbeddingTest, RowSparseSgdGivesTheDenseWeightsExactly) {
  Cluster cluster(50, 2, 3);
  VariableStore dense_stores[2], sparse_stores[2];
  std::vector<std::unique_ptr<PsClient>> dense_clients, sparse_clients;
  for (int p = 0; p < 2; ++p) {
    ASSERT_TRUE(dense_stores[p].CreateVariables(cluster.initial_by_ps[p], Sgd()).ok());
    ASSERT_TRUE(sparse_stores[p].CreateVariables(cluster.initial_by_ps[p], Sgd()).ok());
    dense_clients.push_back(CreateLocalPsClient(p, &dense_stores[p]));
    sparse_clients.push_back(CreateLocalPsClient(p, &sparse_stores[p]));
  }
  auto dense = PsTrainer::Create(cluster.model.get(),
                                 {dense_clients[0].get(), dense_clients[1].get()},
                                 cluster.placement, 1, EmbeddingTraffic::kDense);
  ASSERT_TRUE(dense.ok()) << dense.status();
  auto sparse = PsTrainer::Create(cluster.model.get(),
                                  {sparse_clients[0].get(), sparse_clients[1].get()},
                                  cluster.placement, 1, EmbeddingTraffic::kRowSparse);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_FALSE((*dense)->row_sparse());
  EXPECT_TRUE((*sparse)->row_sparse());
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 30; ++step) {
    Tensor x, y;
    MakeBatch(16, 40, 100 + step, &x, &y);  // rows 40..49 are never used
    auto d = (*dense)->Step(x, y);
    auto s = (*sparse)->Step(x, y);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(d->loss_sum, s->loss_sum) << "step " << step;
    if (step == 0) first_loss = s->loss_sum;
    last_loss = s->loss_sum;
  }
  EXPECT_LT(last_loss, first_loss);
  for (int p = 0; p < 2; ++p) {
    auto d = dense_stores[p].ReadState({});
    auto s = sparse_stores[p].ReadState({});
    ASSERT_TRUE(d.ok() && s.ok());
    ASSERT_EQ(d->size(), s->size());
    for (size_t i = 0; i < d->size(); ++i) {
      SCOPED_TRACE((*d)[i].name);
      EXPECT_EQ((*d)[i].name, (*s)[i].name);
      const auto dv = (*d)[i].value.values();
      const auto sv = (*s)[i].value.values();
      EXPECT_EQ(std::vector<float>(dv.begin(), dv.end()), std::vector<float>(sv.begin(), sv.end()));
    }
  }
  // The table's last shard (rows 34..49 of 50, on ps 0) moved only in the rows used.
  auto last_shard = sparse_stores[0].ReadState({"emb/embeddings/part_2"});
  ASSERT_TRUE(last_shard.ok()) << last_shard.status();
  const std::vector<NamedTensor>& initial = cluster.initial_by_ps[0];
  const NamedTensor* initial_shard = nullptr;
  for (const NamedTensor& t : initial) {
    if (t.name == "emb/embeddings/part_2") initial_shard = &t;
  }
  ASSERT_NE(initial_shard, nullptr);
  const int64_t first_unused = 40 - 34;
  for (int64_t k = first_unused * 8; k < 16 * 8; ++k) {
    EXPECT_EQ((*last_shard)[0].value.data()[k], initial_shard->tensor.data()[k]) << k;
  }
  EXPECT_NE((*last_shard)[0].value.data()[0], initial_shard->tensor.data()[0]);
}

double Counter(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos) << name;
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size()));
}

// Bytes the ps received and sent during one training step (after a first step, so that
// the dense variables' first pull is not counted), through the real gRPC service, one ps
// holding every variable.
struct StepBytes {
  double received = 0;
  double sent = 0;
};

StepBytes OneStepBytes(int64_t table_rows, EmbeddingTraffic traffic) {
  Cluster cluster(table_rows, 1, 1);
  VariableStore store;
  MetricsRegistry registry;
  PsMetrics metrics(&registry, &store);
  PsServiceImpl service(&store, [](const std::string&) {});
  service.set_metrics(&metrics);
  absl::StatusOr<RunningServer> server = StartServer({"127.0.0.1:0", {&service}});
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  std::unique_ptr<PsClient> client =
      CreateGrpcPsClient(0, absl::StrCat("127.0.0.1:", server->port), absl::Seconds(30));
  EXPECT_TRUE(client->CreateVariables(cluster.initial_by_ps[0], Sgd()).ok());
  auto trainer = PsTrainer::Create(cluster.model.get(), {client.get()}, cluster.placement, 1, traffic);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  StepBytes bytes;
  for (int step = 0; step < 2; ++step) {
    const std::string before = registry.TextFormat();
    Tensor x, y;
    // 32 examples x 4 ids from the first 64 rows, whatever the table's size.
    MakeBatch(32, 64, 7 + step, &x, &y);
    auto result = (*trainer)->Step(x, y);
    EXPECT_TRUE(result.ok()) << result.status();
    const std::string after = registry.TextFormat();
    bytes.received = Counter(after, "pstrain_ps_received_bytes_total") -
                     Counter(before, "pstrain_ps_received_bytes_total");
    bytes.sent =
        Counter(after, "pstrain_ps_sent_bytes_total") - Counter(before, "pstrain_ps_sent_bytes_total");
  }
  server->server->Shutdown();
  return bytes;
}

TEST(SparseEmbeddingTest, StepBytesGrowWithRowsTouchedNotTableSize) {
  const StepBytes small = OneStepBytes(1000, EmbeddingTraffic::kRowSparse);
  const StepBytes large = OneStepBytes(200000, EmbeddingTraffic::kRowSparse);
  // The same batch touches the same rows: the same bytes, whatever the table.
  EXPECT_EQ(small.received, large.received);
  EXPECT_EQ(small.sent, large.sent);
  // The Dense layer's 8x3 kernel and 3 biases each way, plus at most 64 rows of 8 floats
  // and their indices: far below one table.
  const double dense_layer = (8 * 3 + 3) * 4;
  EXPECT_GT(small.received, dense_layer);
  EXPECT_LE(small.received, dense_layer + 64 * (8 * 4 + 8));
  EXPECT_LE(small.sent, dense_layer + 64 * 8 * 4);
  // Dense traffic moves the whole table each way, so it grows with it.
  const StepBytes dense = OneStepBytes(200000, EmbeddingTraffic::kDense);
  EXPECT_GE(dense.received, 200000.0 * 8 * 4);
  EXPECT_GE(dense.sent, 200000.0 * 8 * 4);
}

}  // namespace
}  // namespace pstrain
