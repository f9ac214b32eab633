// ShardedEvaluator against real VariableStores through in-process clients: its figures
// are those of the whole weights gathered from the ps (EvaluateOn over
// ShardedVariables::Pull, what the chief ran before), for a dense model and for the zipf
// embedding example's model with its table split over the ps.

#include "ps_server/client/sharded_evaluator.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/data/zipf_ids.h"
#include "common/math/cpu_backend.h"
#include "common/training/evaluator.h"
#include "gtest/gtest.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

// examples/zipf_embedding.json's model with a table of `rows` x 16.
std::string ZipfModel(int64_t rows) {
  return absl::StrCat(R"({"class_name": "Sequential", "config": {"layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8]}},
    {"class_name": "Embedding", "config": {"name": "embedding", "input_dim": )",
                      rows, R"(, "output_dim": 16}},
    {"class_name": "GlobalAveragePooling1D", "config": {"name": "pool"}},
    {"class_name": "Dense", "config": {"name": "classes", "units": 10,
                                       "activation": "softmax"}}]}})");
}

// 8 inputs -> Dense(12, relu) -> Dense(10, softmax): no Embedding, pulled whole.
constexpr char kDenseModel[] = R"({"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 8]}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 12, "activation": "relu"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}]}})";

// `model_json` on 2 ps, every variable in 3 row shards, created from seed 9.
class Cluster {
 public:
  explicit Cluster(const std::string& model_json) : stores_(2) {
    backend_ = CreateCpuBackend();
    auto model = Model::FromKerasJsonText(model_json, backend_.get());
    EXPECT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    EXPECT_TRUE(model_->SetLoss(LossConfig{}).ok());
    std::vector<PsClient*> ps;
    for (int p = 0; p < 2; ++p) {
      clients_.push_back(CreateLocalPsClient(p, &stores_[p]));
      ps.push_back(clients_.back().get());
    }
    OptimizerConfig sgd;
    sgd.set_name("sgd");
    sgd.set_learning_rate(0.1f);
    variables_ = std::make_unique<ShardedVariables>(model_.get(), ps, sgd, ConsistencyConfig());
    PlacementPolicy policy;
    policy.strategy = PlacementStrategy::kRoundRobin;
    policy.num_shards = 3;
    EXPECT_TRUE(variables_->Create(policy, 9).ok());
    evaluator_ = std::make_unique<ShardedEvaluator>(model_.get(), variables_.get(), ps);
  }

  // What the chief computed before: every variable gathered whole.
  EvaluationResult Gathered(const Dataset& data, int64_t batch) {
    auto weights = variables_->Pull();
    EXPECT_TRUE(weights.ok()) << weights.status();
    auto result = EvaluateOn(model_.get(), *weights, data, batch);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : EvaluationResult{};
  }
  ShardedEvaluator& evaluator() { return *evaluator_; }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<VariableStore> stores_;
  std::vector<std::unique_ptr<PsClient>> clients_;
  std::unique_ptr<ShardedVariables> variables_;
  std::unique_ptr<ShardedEvaluator> evaluator_;
};

void ExpectSameFigures(const EvaluationResult& by_rows, const EvaluationResult& whole) {
  EXPECT_EQ(by_rows.samples, whole.samples);
  EXPECT_DOUBLE_EQ(by_rows.loss, whole.loss);
  EXPECT_DOUBLE_EQ(by_rows.accuracy, whole.accuracy);
}

TEST(ShardedEvaluatorTest, AnEmbeddingTableReadByRowsGivesTheGatheredFigures) {
  ZipfIdsOptions zipf;
  zipf.samples = 2500;
  zipf.vocabulary = 30000;
  zipf.seed = 7;
  zipf.stream = 1;
  auto data = MakeZipfIdsDataset(zipf);
  ASSERT_TRUE(data.ok()) << data.status();
  Cluster cluster(ZipfModel(zipf.vocabulary));
  // Batches of 1000 and a shorter last one, twice: the compact model is reused.
  for (int round = 0; round < 2; ++round) {
    auto by_rows = cluster.evaluator().Evaluate(*data, 1000);
    ASSERT_TRUE(by_rows.ok()) << by_rows.status();
    EXPECT_EQ(by_rows->samples, 2500);
    ExpectSameFigures(*by_rows, cluster.Gathered(*data, 1000));
  }
}

TEST(ShardedEvaluatorTest, ADenseModelGivesTheGatheredFigures) {
  Tensor x({300, 8});
  Tensor y({300});
  for (int i = 0; i < 300; ++i) {
    for (int j = 0; j < 8; ++j) x.data()[i * 8 + j] = static_cast<float>((i * 7 + j * 3) % 11) / 11;
    y.data()[i] = static_cast<float>(i % 10);
  }
  auto data = MakeDataset(std::move(x), std::move(y), 10);
  ASSERT_TRUE(data.ok()) << data.status();
  Cluster cluster(kDenseModel);
  auto evaluated = cluster.evaluator().Evaluate(*data, 128);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  ExpectSameFigures(*evaluated, cluster.Gathered(*data, 128));
}

TEST(ShardedEvaluatorTest, AnIdOutsideTheTableIsRefusedNamingIt) {
  Cluster cluster(ZipfModel(100));
  Tensor x({1, 8}, {1, 2, 3, 4, 5, 6, 7, 100});
  auto data = MakeDataset(std::move(x), Tensor({1}, {0}), 10);
  ASSERT_TRUE(data.ok()) << data.status();
  auto evaluated = cluster.evaluator().Evaluate(*data, 10);
  EXPECT_EQ(evaluated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(evaluated.status().message().find("id 100"), std::string::npos)
      << evaluated.status();
}

}  // namespace
}  // namespace pstrain
