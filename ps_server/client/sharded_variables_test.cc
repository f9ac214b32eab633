// ShardedVariables against real VariableStores through in-process clients.

#include "ps_server/client/sharded_variables.h"

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/keras_export.h"
#include "common/math/cpu_backend.h"
#include "common/model/job_spec.h"
#include "gtest/gtest.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

// 4 inputs -> Dense(6) -> Dense(3): kernels of 4 and 6 rows, biases of 6 and 3.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 6}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}})";

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

PlacementPolicy Split(int num_shards) {
  PlacementPolicy policy;
  policy.strategy = PlacementStrategy::kRoundRobin;
  policy.num_shards = num_shards;
  return policy;
}

// A ps on a machine where a .keras file the chief names is not: its CreateVariablesFromKeras
// asks the real reader for a path that does not exist here; everything else as `ps`.
class FileElsewherePs : public PsClient {
 public:
  explicit FileElsewherePs(std::unique_ptr<PsClient> ps) : ps_(std::move(ps)) {}
  using PsClient::CreateVariables;
  using PsClient::Pull;
  using PsClient::PushPull;
  std::string name() const override { return ps_->name(); }
  absl::Status CreateVariables(std::vector<NamedTensor> v, const OptimizerConfig& o,
                               const ConsistencyConfig& c) override {
    return ps_->CreateVariables(std::move(v), o, c);
  }
  absl::Status CreateVariables(std::vector<NamedTensor> v, std::vector<InitialShard> d,
                               const OptimizerConfig& o, const ConsistencyConfig& c) override {
    return ps_->CreateVariables(std::move(v), std::move(d), o, c);
  }
  absl::Status CreateVariablesFromKeras(const KerasWeightsFile& file,
                                        std::vector<KerasRowsRequest> shards,
                                        const OptimizerConfig& o,
                                        const ConsistencyConfig& c) override {
    KerasWeightsFile elsewhere = file;
    elsewhere.path = "/not-mounted-on-this-ps/model.keras";
    return ps_->CreateVariablesFromKeras(elsewhere, std::move(shards), o, c);
  }
  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> n,
                                           std::vector<int64_t>* v) override {
    return ps_->Pull(n, v);
  }
  absl::Status Push(absl::Span<const NamedTensor> g, int64_t s) override { return ps_->Push(g, s); }
  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> g,
                                               const PushContext& c,
                                               std::vector<int64_t>* v) override {
    return ps_->PushPull(g, c, v);
  }
  absl::StatusOr<PsStatusResponse> GetStatus() override { return ps_->GetStatus(); }
  absl::StatusOr<std::vector<VariableSnapshot>> ReadState(
      absl::Span<const std::string> n) override {
    return ps_->ReadState(n);
  }
  absl::Status RestoreState(const std::vector<VariableSnapshot>& s) override {
    return ps_->RestoreState(s);
  }
  absl::Status Shutdown(const std::string& r) override { return ps_->Shutdown(r); }

 private:
  std::unique_ptr<PsClient> ps_;
};

// A model and `num_ps` stores with in-process clients, Adam on every ps; ps
// `file_elsewhere` (if any) cannot reach the chief's .keras files.
class Cluster {
 public:
  explicit Cluster(int num_ps, int file_elsewhere = -1) : stores_(num_ps) {
    backend_ = CreateCpuBackend();
    model_ = *Model::FromKerasJsonText(kModel, backend_.get());
    for (int p = 0; p < num_ps; ++p) {
      clients_.push_back(CreateLocalPsClient(p, &stores_[p]));
      if (p == file_elsewhere) {
        clients_.back() = std::make_unique<FileElsewherePs>(std::move(clients_.back()));
      }
    }
    OptimizerConfig adam;
    adam.set_name("adam");
    adam.set_learning_rate(0.5f);
    std::vector<PsClient*> ps;
    for (auto& c : clients_) ps.push_back(c.get());
    variables_ = std::make_unique<ShardedVariables>(model_.get(), ps, adam, ConsistencyConfig());
  }
  ShardedVariables& variables() { return *variables_; }
  VariableStore& store(int p) { return stores_[p]; }
  const Model& model() const { return *model_; }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<VariableStore> stores_;
  std::vector<std::unique_ptr<PsClient>> clients_;
  std::unique_ptr<ShardedVariables> variables_;
};

TEST(ShardedVariablesTest, CreatesEveryShardWithItsRowsOfTheInitialValues) {
  Cluster cluster(2);
  EXPECT_TRUE(cluster.variables().placement().empty());
  EXPECT_FALSE(cluster.variables().Pull().ok());  // nothing placed yet
  ASSERT_TRUE(cluster.variables().Create(Split(2), 5).ok());
  EXPECT_EQ(cluster.variables().placement().size(), 8u);  // 4 variables, 2 shards each
  EXPECT_EQ(cluster.store(0).List().size(), 4u);
  EXPECT_EQ(cluster.store(1).List().size(), 4u);
  auto pulled = cluster.variables().Pull();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  const std::vector<Tensor> initial = cluster.model().InitialValues(5);
  ASSERT_EQ(pulled->size(), initial.size());
  for (size_t i = 0; i < initial.size(); ++i) EXPECT_EQ(Values((*pulled)[i]), Values(initial[i]));
}

// Each ps draws its own rows, and a variable's values do not depend on how it is split:
// on 1, 2 or 3 ps, whole or in shards, every variable starts bit for bit as the
// one-process trainer's (Model::InitialValues).
TEST(ShardedVariablesTest, EveryPlacementStartsFromTheSameValues) {
  Cluster reference(1);
  const std::vector<Tensor> initial = reference.model().InitialValues(5);
  for (int num_ps : {1, 2, 3}) {
    for (int shards : {1, 2, 3}) {
      Cluster cluster(num_ps);
      ASSERT_TRUE(cluster.variables().Create(Split(shards), 5).ok());
      auto pulled = cluster.variables().Pull();
      ASSERT_TRUE(pulled.ok()) << pulled.status();
      ASSERT_EQ(pulled->size(), initial.size());
      for (size_t i = 0; i < initial.size(); ++i) {
        EXPECT_TRUE((*pulled)[i].values() == initial[i].values())
            << num_ps << " ps, " << shards << " shards, variable " << i;
      }
    }
  }
  // Another seed, other values.
  Cluster other(2);
  ASSERT_TRUE(other.variables().Create(Split(2), 6).ok());
  auto pulled = other.variables().Pull();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_NE(Values((*pulled)[0]), Values(initial[0]));
}

// Initial values given whole (a .keras model's weights) are sliced and sent as before.
TEST(ShardedVariablesTest, GivenInitialValuesAreSlicedForThePs) {
  Cluster cluster(2);
  auto given = std::make_shared<std::vector<Tensor>>();
  float next = 0.5f;
  for (const VariableSpec& v : cluster.model().variables()) {
    Tensor t(v.shape);
    for (float& x : t.values()) x = (next += 0.25f);
    given->push_back(std::move(t));
  }
  cluster.variables().SetInitialValues(given);
  ASSERT_TRUE(cluster.variables().Create(Split(2), 5).ok());
  auto pulled = cluster.variables().Pull();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  ASSERT_EQ(pulled->size(), given->size());
  for (size_t i = 0; i < given->size(); ++i) {
    EXPECT_EQ(Values((*pulled)[i]), Values((*given)[i])) << i;
  }
  // Recreating a ps's shards without a checkpoint sends the given values again (a ps
  // that still holds them keeps its own).
  ASSERT_TRUE(cluster.variables().Recreate(1, nullptr, "", 5).ok());
  pulled = cluster.variables().Pull();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(Values((*pulled)[3]), Values((*given)[3]));
}

// The model's weights (distinct values, none of them drawn from a seed) as a .keras file,
// and that file's path as the chief has it (JobSpec::initial_weights_file).
std::pair<std::vector<Tensor>, std::string> WriteKerasWeights(const Model& model,
                                                              const std::string& name) {
  std::vector<Tensor> weights;
  float next = 0.125f;
  for (const VariableSpec& v : model.variables()) {
    Tensor t(v.shape);
    for (float& x : t.values()) x = (next += 0.375f);
    weights.push_back(std::move(t));
  }
  const std::string dir = std::filesystem::path(testing::TempDir()).lexically_normal().string();
  const std::string path = absl::StrCat(dir, dir.back() == '/' ? "" : "/", name, ".keras");
  absl::StatusOr<JobSpec> job = ParseJobSpec(
      absl::StrCat(R"({"model": )", kModel, R"(, "compile": {"loss": "mse"}})"), "");
  EXPECT_TRUE(job.ok()) << job.status();
  if (job.ok()) {
    const absl::Status written = ExportKerasModel(*job, weights, path);
    EXPECT_TRUE(written.ok()) << written;
  }
  return {std::move(weights), path};
}

// A model started from a .keras file: each ps reads its own rows of each variable from
// the file, and the values are the file's bit for bit, on 2 and on 3 ps, whole or split.
TEST(ShardedVariablesTest, EachPsReadsItsRowsOfAKerasFile) {
  Cluster reference(1);
  const auto [weights, path] = WriteKerasWeights(reference.model(), "rows_from_file");
  for (int num_ps : {2, 3}) {
    for (int shards : {1, num_ps}) {
      Cluster cluster(num_ps);
      cluster.variables().SetInitialWeightsFile(path);
      const absl::Status created = cluster.variables().Create(Split(shards), 5);
      ASSERT_TRUE(created.ok()) << created;
      auto pulled = cluster.variables().Pull();
      ASSERT_TRUE(pulled.ok()) << pulled.status();
      ASSERT_EQ(pulled->size(), weights.size());
      for (size_t i = 0; i < weights.size(); ++i) {
        EXPECT_EQ(Values((*pulled)[i]), Values(weights[i]))
            << "variable " << i << " on " << num_ps << " ps, " << shards << " shards";
      }
      // Recreating a ps's shards without a checkpoint has it read its rows again (a ps
      // that still holds them keeps its own).
      const absl::Status recreated = cluster.variables().Recreate(1, nullptr, "", 5);
      EXPECT_TRUE(recreated.ok()) << recreated;
    }
  }
}

// A ps that cannot reach the file (another machine, no shared volume) answers so, and
// the chief sends it its rows instead: the values are still the file's, on every ps.
TEST(ShardedVariablesTest, APsThatCannotReachTheFileIsSentItsRows) {
  Cluster cluster(3, /*file_elsewhere=*/1);
  const auto [weights, path] = WriteKerasWeights(cluster.model(), "fallback");
  cluster.variables().SetInitialWeightsFile(path);
  const absl::Status created = cluster.variables().Create(Split(3), 5);
  ASSERT_TRUE(created.ok()) << created;
  EXPECT_EQ(cluster.store(1).List().size(), 4u);  // a shard of each variable
  auto pulled = cluster.variables().Pull();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  ASSERT_EQ(pulled->size(), weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    EXPECT_EQ(Values((*pulled)[i]), Values(weights[i])) << i;
  }
  // A file the chief itself cannot read is the job's error, not a fallback.
  Cluster broken(2);
  broken.variables().SetInitialWeightsFile(path + ".missing.keras");
  EXPECT_FALSE(broken.variables().Create(Split(2), 5).ok());
}

// A state read under one placement restores under another: the ps count and the split
// may change between the run that wrote a checkpoint and the one that reads it.
TEST(ShardedVariablesTest, AStateMovesBetweenPlacements) {
  Cluster split(2);
  ASSERT_TRUE(split.variables().Create(Split(2), 5).ok());
  // One push so the optimizer slots and counts are not the fresh ones.
  std::vector<NamedTensor> gradients;
  for (const VariablePlacementEntry& e : split.variables().placement()) {
    if (e.ps_index() != 0) continue;
    Tensor g(std::vector<int64_t>(e.shape().begin(), e.shape().end()));
    for (float& v : g.values()) v = 1.0f;
    gradients.push_back({e.name(), std::move(g)});
  }
  ASSERT_TRUE(split.store(0).Push(gradients).ok());
  TrainingState state;
  state.epochs_done = 1;
  state.global_step = 1;
  auto read = split.variables().ReadStates();
  ASSERT_TRUE(read.ok()) << read.status();
  state.variables = *read;
  ASSERT_EQ(state.variables[0].name, "hidden/kernel");
  ASSERT_EQ(state.variables[0].slots.size(), 2u);  // Adam's momentum and velocity
  EXPECT_EQ(state.variables[0].iterations, 1);

  Cluster whole(3);
  ASSERT_TRUE(whole.variables().Create(Split(1), 9).ok());
  ASSERT_TRUE(whole.variables().Restore(state, "the state").ok());
  auto back = whole.variables().ReadStates();
  ASSERT_TRUE(back.ok()) << back.status();
  for (size_t i = 0; i < state.variables.size(); ++i) {
    EXPECT_EQ(Values((*back)[i].value), Values(state.variables[i].value)) << i;
    EXPECT_EQ((*back)[i].iterations, state.variables[i].iterations) << i;
    ASSERT_EQ((*back)[i].slots.size(), 2u);
    EXPECT_EQ(Values((*back)[i].slots[1].tensor), Values(state.variables[i].slots[1].tensor));
  }
}

TEST(ShardedVariablesTest, AStateThatDoesNotFitChangesNothing) {
  Cluster cluster(2);
  ASSERT_TRUE(cluster.variables().Create(Split(2), 5).ok());
  auto before = cluster.variables().Pull();
  ASSERT_TRUE(before.ok());
  TrainingState state;
  auto read = cluster.variables().ReadStates();
  ASSERT_TRUE(read.ok());
  state.variables = *read;
  state.variables.back().value = Tensor({7});
  for (float& v : state.variables.front().value.values()) v = 42.0f;
  const absl::Status restored = cluster.variables().Restore(state, "checkpoint c");
  EXPECT_EQ(restored.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(restored.message().rfind("checkpoint c does not fit the model: out/bias", 0), 0u)
      << restored;
  auto after = cluster.variables().Pull();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Values((*after)[0]), Values((*before)[0]));
}

TEST(ShardedVariablesTest, CensusFindsEveryPsHoldingItsShards) {
  Cluster cluster(2);
  ASSERT_TRUE(cluster.variables().Create(Split(2), 5).ok());
  auto census = cluster.variables().TakeCensus();
  ASSERT_TRUE(census.ok()) << census.status();
  EXPECT_TRUE(census->unreachable.empty());
  EXPECT_TRUE(census->emptied.empty());
}

}  // namespace
}  // namespace pstrain
