// Sharded checkpoints (format v2) through the chief's Checkpointer against real
// VariableStores, each with its CheckpointShards on a real folder (in-process ps
// clients): written by 3 ps, restored onto 2 and onto 4, values, slots and counts exact;
// the fallback to format 1; a commit that never happened.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/math/cpu_backend.h"
#include "common/training/training_state.h"
#include "gtest/gtest.h"
#include "ps_server/checkpoint_shards.h"
#include "ps_server/client/checkpointer.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

// An embedding table (split by rows over the ps), a dense kernel and a bias, with Adam's
// two slots for each.
constexpr char kJob[] = R"({"model": {"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 2]}},
  {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 11, "output_dim": 4}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}},
  "compile": {"optimizer": "adam", "loss": "mse"}})";

std::string FreshRoot(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  fs::remove_all(root);
  fs::create_directories(root);
  return root;
}

// `num_ps` in-process ps tasks, every variable split into num_ps + 1 shards; each ps writes
// its checkpoint shards into `root` unless `root` is empty.
struct Cluster {
  Cluster(const JobSpec& job, const Model* model, int num_ps, const std::string& root,
          uint64_t seed)
      : stores(num_ps) {
    std::vector<PsClient*> ps;
    for (int p = 0; p < num_ps; ++p) {
      if (!root.empty()) {
        CheckpointShards::Options options;
        options.block_bytes = 20;  // several blocks per piece: block boundaries exercised
        shards.push_back(std::make_unique<CheckpointShards>(&stores[p], root, options));
      }
      clients.push_back(
          CreateLocalPsClient(p, &stores[p], root.empty() ? nullptr : shards.back().get()));
      ps.push_back(clients.back().get());
    }
    variables = std::make_unique<ShardedVariables>(model, ps, job.optimizer, ConsistencyConfig());
    // One shard more than ps: some ps hold two shards of a variable.
    PlacementPolicy split;
    split.num_shards = num_ps + 1;
    created = variables->Create(split, seed);
  }

  std::vector<VariableStore> stores;
  std::vector<std::unique_ptr<CheckpointShards>> shards;
  std::vector<std::unique_ptr<PsClient>> clients;
  std::unique_ptr<ShardedVariables> variables;
  absl::Status created;
};

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

void ExpectSameState(std::vector<VariableSnapshot> got, std::vector<VariableSnapshot> want) {
  const auto by_name = [](const VariableSnapshot& a, const VariableSnapshot& b) {
    return a.name < b.name;
  };
  std::sort(got.begin(), got.end(), by_name);
  std::sort(want.begin(), want.end(), by_name);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].value.shape(), want[i].value.shape());
    EXPECT_EQ(Values(got[i].value), Values(want[i].value));
    EXPECT_EQ(got[i].iterations, want[i].iterations);
    EXPECT_EQ(got[i].version, want[i].version);
    ASSERT_EQ(got[i].slots.size(), want[i].slots.size());
    for (size_t s = 0; s < got[i].slots.size(); ++s) {
      EXPECT_EQ(got[i].slots[s].name, want[i].slots[s].name);
      EXPECT_EQ(Values(got[i].slots[s].tensor), Values(want[i].slots[s].tensor));
    }
  }
}

class ShardedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = *ParseJobSpec(kJob, "");
    backend_ = CreateCpuBackend();
    model_ = *Model::FromKerasJson(job_.model, backend_.get());
  }

  // The state of `cluster` replaced with distinct values everywhere (values, both slots,
  // counts), so that nothing restored can match by chance.
  std::vector<VariableSnapshot> Scramble(const Cluster& cluster) {
    auto states = cluster.variables->ReadStates();
    EXPECT_TRUE(states.ok()) << states.status();
    std::mt19937 random(7);
    std::uniform_real_distribution<float> uniform(0.01f, 1.0f);
    TrainingState state;
    state.variables = *states;
    for (VariableSnapshot& v : state.variables) {
      for (float& x : v.value.values()) x = uniform(random) - 0.5f;
      for (NamedTensor& slot : v.slots) {
        for (float& x : slot.tensor.values()) x = uniform(random);
      }
      v.iterations = 41;
      v.version = 40;
    }
    EXPECT_TRUE(cluster.variables->Restore(state, "scrambled").ok());
    auto back = cluster.variables->ReadStates();
    EXPECT_TRUE(back.ok());
    return *back;
  }

  Checkpointer::Options OptionsIn(const std::string& root) {
    Checkpointer::Options options;
    options.dir = root;
    return options;
  }

  JobSpec job_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_F(ShardedCheckpointTest, WrittenByThreePsRestoresOntoTwoAndOntoFour) {
  const std::string root = FreshRoot("three_to_two_and_four");
  Cluster three(job_, model_.get(), 3, root, 3);
  ASSERT_TRUE(three.created.ok()) << three.created;
  const std::vector<VariableSnapshot> saved = Scramble(three);
  Checkpointer writer(OptionsIn(root), &job_, three.variables.get());
  ASSERT_TRUE(writer.Write(2, 40, nullptr).ok());

  // Format 2: one shard file per ps and the manifest, nothing gathered.
  const std::string dir = absl::StrCat(root, "/ckpt-40");
  for (const char* file : {"manifest.json", "shard-00000", "shard-00001", "shard-00002"}) {
    EXPECT_TRUE(fs::exists(absl::StrCat(dir, "/", file))) << file;
  }
  EXPECT_FALSE(fs::exists(absl::StrCat(dir, "/data-00000")));

  for (int num_ps : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(num_ps, " ps"));
    Cluster other(job_, model_.get(), num_ps, root, 99);
    ASSERT_TRUE(other.created.ok()) << other.created;
    Checkpointer checkpointer(OptionsIn(root), &job_, other.variables.get());
    auto reader = checkpointer.OpenLatest();
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->version(), 2);
    EXPECT_FALSE((*reader)->tensors_loaded());  // the chief holds no tensor
    EXPECT_EQ((*reader)->step(), 40);
    EXPECT_EQ((*reader)->epoch(), 2);
    ASSERT_TRUE(checkpointer.RestorableByPs(**reader));
    absl::Status restored = checkpointer.Restore(**reader);
    ASSERT_TRUE(restored.ok()) << restored;
    auto states = other.variables->ReadStates();
    ASSERT_TRUE(states.ok()) << states.status();
    ExpectSameState(*states, saved);
  }

  // Read whole (tools/evaluate, export): the same state.
  auto whole = CheckpointReader::Open(root);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE((*whole)->tensors_loaded());
  auto state = TrainingStateFromCheckpoint(**whole);
  ASSERT_TRUE(state.ok()) << state.status();
  ExpectSameState(state->variables, saved);
}

TEST_F(ShardedCheckpointTest, APsWithoutTheFolderMakesTheChiefWriteFormatOne) {
  const std::string root = FreshRoot("fallback");
  Cluster cluster(job_, model_.get(), 2, /*root=*/"", 3);
  ASSERT_TRUE(cluster.created.ok());
  Scramble(cluster);
  Checkpointer checkpointer(OptionsIn(root), &job_, cluster.variables.get());
  ASSERT_TRUE(checkpointer.Write(1, 10, nullptr).ok());
  auto reader = checkpointer.OpenLatest();
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->version(), 1);
  EXPECT_TRUE(fs::exists(absl::StrCat(root, "/ckpt-10/data-00000")));

  // ps whose folder is another one than the chief's: they do not see its temporary
  // folder, and the chief falls back too.
  const std::string elsewhere = FreshRoot("fallback_elsewhere");
  Cluster apart(job_, model_.get(), 2, elsewhere, 3);
  ASSERT_TRUE(apart.created.ok());
  Checkpointer chief(OptionsIn(root), &job_, apart.variables.get());
  ASSERT_TRUE(chief.Write(1, 20, nullptr).ok());
  auto apart_reader = chief.OpenLatest();
  ASSERT_TRUE(apart_reader.ok());
  EXPECT_EQ((*apart_reader)->step(), 20);
  EXPECT_EQ((*apart_reader)->version(), 1);
  for (const auto& entry : fs::directory_iterator(root)) {
    EXPECT_NE(entry.path().filename().string().rfind(".tmp-", 0), 0u) << entry.path();
  }
}

TEST_F(ShardedCheckpointTest, AChiefKilledBeforeItsCommitLeavesThePreviousCheckpoint) {
  const std::string root = FreshRoot("uncommitted");
  Cluster cluster(job_, model_.get(), 3, root, 3);
  ASSERT_TRUE(cluster.created.ok());
  const std::vector<VariableSnapshot> saved = Scramble(cluster);
  {
    Checkpointer checkpointer(OptionsIn(root), &job_, cluster.variables.get());
    ASSERT_TRUE(checkpointer.Write(1, 40, nullptr).ok());
  }
  // A chief that got every ps's shard and died before the manifest and the rename.
  CheckpointWriter dying(root, CheckpointWriter::Options());
  auto temp = dying.BeginSharded(50);
  ASSERT_TRUE(temp.ok());
  ASSERT_TRUE(cluster.variables->WriteCheckpointShards(*temp).ok());
  ASSERT_TRUE(fs::exists(absl::StrCat(root, "/", *temp, "/shard-00001")));

  // The next chief: the newest checkpoint is the previous one, the folder is gone.
  Checkpointer next(OptionsIn(root), &job_, cluster.variables.get());
  EXPECT_FALSE(fs::exists(absl::StrCat(root, "/", *temp)));
  auto reader = next.OpenLatest();
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->step(), 40);
  ASSERT_TRUE(next.Restore(**reader).ok());
  auto states = cluster.variables->ReadStates();
  ASSERT_TRUE(states.ok());
  ExpectSameState(*states, saved);
}

}  // namespace
}  // namespace pstrain
