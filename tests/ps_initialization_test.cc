// Each ps draws its own rows of every variable (issue 25, item 1), on real ps_server
// processes on free ports, with this test as the chief: ShardedVariables and PsRecovery,
// the code the chief daemon and a custom loop's chief run to create and recover the
// shards. The same model split over 2 ps and over 3 ps starts from identical weights, bit
// for bit, and they are the one-process trainer's (Model::InitialValues); a ps killed
// before any checkpoint exists comes back empty and draws exactly its initial rows again,
// sent nothing but how to draw them, while the other ps keep their values.

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model/model.h"
#include "common/rpc/client_security.h"
#include "common/sharding/shard_layout.h"
#include "common/training/training_state.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "ps_server/client/ps_recovery.h"
#include "ps_server/client/sharded_variables.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

constexpr uint64_t kSeed = 17;

// A 5,000-row table and two dense layers, with an initializer of every kind: uniform,
// truncated normal (he_normal), constant, untruncated normal, and glorot_uniform.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8]}},
  {"class_name": "Embedding", "config": {"name": "embedding", "input_dim": 5000,
   "output_dim": 16, "embeddings_initializer": {"class_name": "RandomUniform",
   "config": {"minval": -0.05, "maxval": 0.05}}}},
  {"class_name": "GlobalAveragePooling1D", "config": {"name": "pool"}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 32, "activation": "relu",
   "kernel_initializer": "he_normal",
   "bias_initializer": {"class_name": "Constant", "config": {"value": 0.1}}}},
  {"class_name": "Dense", "config": {"name": "out", "units": 10,
   "bias_initializer": {"class_name": "RandomNormal", "config": {"stddev": 0.01}}}}]}})";

std::string JobToken() {
  const char* token = std::getenv(kAuthTokenEnvironmentVariable);
  return token != nullptr ? token : "";
}

OptimizerConfig Adam() {
  OptimizerConfig adam;
  adam.set_name("adam");
  adam.set_learning_rate(0.01f);
  return adam;
}

// Every variable with at least `n` rows in `n` shards, shard i on ps i.
PlacementPolicy SplitOver(int n) {
  PlacementPolicy policy;
  policy.strategy = PlacementStrategy::kRoundRobin;
  policy.num_shards = n;
  return policy;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * a.num_elements()) == 0;
}

// One ps_server process in a group of its own, so that killing it leaves the others be.
// It serves while it waits to register with a chief that never comes (this test is the
// chief). Killed, with its process group, when destroyed.
class PsProcess {
 public:
  PsProcess(std::string name, std::string tf_config)
      : name_(std::move(name)), tf_config_(std::move(tf_config)) {}
  ~PsProcess() { Kill(); }

  bool Start() {
    group_ = std::make_unique<ProcessGroup>();
    const absl::Status started = group_->Start(
        {name_, "ps_server/ps_server", {"--register_timeout=10m"}, {{"TF_CONFIG", tf_config_}}});
    EXPECT_TRUE(started.ok()) << name_ << ": " << started;
    absl::StatusOr<pid_t> pid = group_->Pid(name_);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!started.ok() || !pid.ok()) return false;
    pid_ = *pid;
    wait_ = std::thread([this] { run_ = CollectRun(*group_, absl::Minutes(10), absl::Seconds(5)); });
    return true;
  }

  // SIGKILL, as a crashed or evicted ps ends; waits until it is gone.
  void Kill() {
    if (pid_ > 0) kill(-pid_, SIGKILL);
    pid_ = -1;
    if (wait_.joinable()) wait_.join();
  }

 private:
  const std::string name_;
  const std::string tf_config_;
  std::unique_ptr<ProcessGroup> group_;
  pid_t pid_ = -1;
  std::thread wait_;
  ProcessRun run_;
};

// `n` ps processes on free ports and a client of each.
class PsCluster {
 public:
  explicit PsCluster(int n) {
    const auto spec = LoopbackCluster(n, 1);  // only the ps run
    for (int i = 0; i < n; ++i) {
      processes_.push_back(std::make_unique<PsProcess>(absl::StrCat("ps", i),
                                                       MakeTfConfig(spec, "ps", i)));
      processes_.back()->Start();
      clients_.push_back(
          CreateGrpcPsClient(i, spec[1].second[i], ScaledForSanitizers(absl::Seconds(60))));
    }
    for (int i = 0; i < n; ++i) EXPECT_TRUE(WaitServing(i)) << "ps " << i << " never served";
  }

  bool WaitServing(int p) {
    const absl::Time give_up = absl::Now() + ScaledForSanitizers(absl::Seconds(60));
    while (absl::Now() < give_up) {
      if (clients_[p]->GetStatus().ok()) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }

  std::vector<PsClient*> clients() {
    std::vector<PsClient*> out;
    for (auto& c : clients_) out.push_back(c.get());
    return out;
  }
  PsClient& client(int p) { return *clients_[p]; }
  PsProcess& process(int p) { return *processes_[p]; }

 private:
  std::vector<std::unique_ptr<PsProcess>> processes_;
  std::vector<std::unique_ptr<PsClient>> clients_;
};

class PsInitializationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // This test places the variables, as the chief does (CreateVariables is the chief's).
    SetClientSecurity({JobToken(), {Role::kChief, 0}});
    absl::StatusOr<std::unique_ptr<Model>> model = Model::FromKerasJsonText(kModel, nullptr);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    for (size_t v = 0; v < model_->variables().size(); ++v) {
      index_[model_->variables()[v].name] = v;
    }
  }

  std::unique_ptr<Model> model_;
  std::map<std::string, size_t> index_;  // variable name -> index in the model
};

TEST_F(PsInitializationTest, TwoPsAndThreePsStartFromTheOneProcessWeightsBitForBit) {
  const std::vector<Tensor> one_process = model_->InitialValues(kSeed);
  std::map<int, std::vector<Tensor>> pulled;
  for (int n : {2, 3}) {
    PsCluster cluster(n);
    ShardedVariables variables(model_.get(), cluster.clients(), Adam(), ConsistencyConfig());
    const absl::Status created = variables.Create(SplitOver(n), kSeed);
    ASSERT_TRUE(created.ok()) << created;
    // The table, the kernels and the biases are each split over every ps, so each ps
    // drew its own rows of them.
    std::map<std::string, std::set<int>> ps_of;
    for (const VariablePlacementEntry& e : variables.placement()) {
      ps_of[e.variable_name()].insert(e.ps_index());
    }
    ASSERT_EQ(ps_of.size(), one_process.size());
    for (const auto& [name, ps] : ps_of) EXPECT_EQ(ps.size(), static_cast<size_t>(n)) << name;
    // Before any step: every variable whole, read back from the shards.
    absl::StatusOr<std::vector<Tensor>> values = variables.Pull();
    ASSERT_TRUE(values.ok()) << values.status();
    pulled[n] = *std::move(values);
  }
  ASSERT_EQ(pulled[2].size(), one_process.size());
  ASSERT_EQ(pulled[3].size(), one_process.size());
  for (size_t v = 0; v < one_process.size(); ++v) {
    const std::string& name = model_->variables()[v].name;
    EXPECT_TRUE(SameBits(pulled[2][v], pulled[3][v])) << name << ": 2 ps and 3 ps differ";
    EXPECT_TRUE(SameBits(pulled[2][v], one_process[v]))
        << name << ": the cluster does not start where one process starts";
  }
  // Not all alike: the values are drawn (a test of zeros would pass the above).
  EXPECT_NE(one_process[0].values()[0], one_process[0].values()[1]);
}

TEST_F(PsInitializationTest, APsKilledBeforeAnyCheckpointDrawsExactlyItsInitialRowsAgain) {
  PsCluster cluster(3);
  ShardedVariables variables(model_.get(), cluster.clients(), Adam(), ConsistencyConfig());
  const absl::Status created = variables.Create(SplitOver(3), kSeed);
  ASSERT_TRUE(created.ok()) << created;
  // Move every value away from its initial one, as training would.
  absl::StatusOr<std::vector<VariableSnapshot>> states = variables.ReadStates();
  ASSERT_TRUE(states.ok()) << states.status();
  TrainingState state;
  state.variables = *std::move(states);
  for (VariableSnapshot& s : state.variables) {
    for (float& x : s.value.values()) x += 1.0f;
  }
  const absl::Status moved = variables.Restore(state, "the test's values");
  ASSERT_TRUE(moved.ok()) << moved;
  absl::StatusOr<std::vector<Tensor>> trained = variables.Pull();
  ASSERT_TRUE(trained.ok()) << trained.status();

  cluster.process(1).Kill();
  EXPECT_FALSE(cluster.client(1).GetStatus().ok()) << "ps 1 still answers";
  ASSERT_TRUE(cluster.process(1).Start());
  ASSERT_TRUE(cluster.WaitServing(1));
  PsRecovery::Options options;
  options.seed = kSeed;
  options.timeout = ScaledForSanitizers(absl::Seconds(60));
  options.poll_interval = absl::Milliseconds(50);
  PsRecovery recovery(options, &variables, /*checkpointer=*/nullptr, /*restored_from=*/nullptr);
  const absl::Status recovered = recovery.Recover("");
  ASSERT_TRUE(recovered.ok()) << recovered;

  // Each shard read from the ps that holds it: ps 1's are exactly the initial rows (drawn
  // there again), ps 0's and ps 2's the values they had.
  const std::vector<Tensor> initial = model_->InitialValues(kSeed);
  int redrawn = 0;
  for (const VariablePlacementEntry& e : variables.placement()) {
    const size_t v = index_.at(e.variable_name());
    absl::StatusOr<std::vector<Tensor>> held = cluster.client(e.ps_index()).Pull({e.name()});
    ASSERT_TRUE(held.ok()) << held.status();
    absl::StatusOr<Tensor> expected =
        SliceShard(e.ps_index() == 1 ? initial[v] : (*trained)[v], e);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_TRUE(SameBits((*held)[0], *expected))
        << e.name() << " on ps " << e.ps_index()
        << (e.ps_index() == 1 ? ": not its initial rows" : ": not what it held");
    if (e.ps_index() == 1) ++redrawn;
  }
  EXPECT_EQ(redrawn, static_cast<int>(index_.size()));  // one shard of every variable
}

}  // namespace
}  // namespace pstrain
