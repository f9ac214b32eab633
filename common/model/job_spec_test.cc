#include "common/model/job_spec.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

const char kModel[] = R"({"class_name":"Sequential","config":{"name":"mlp","layers":[{"class_name":"InputLayer","config":{"batch_input_shape":[null,4]}},{"class_name":"Dense","config":{"name":"dense","units":3,"activation":"softmax"}}]}})";

std::string Job(const std::string& model, const std::string& compile,
                const std::string& extra = "") {
  return std::string(R"({"model":)") + model + R"(,"compile":)" + compile + extra + "}";
}

std::string CompileWithSgdRate(const std::string& lr) {
  return R"({"loss":"mse","optimizer":{"class_name":"SGD","config":{"learning_rate":)" + lr +
         "}}}";
}

void ExpectInvalid(const absl::StatusOr<JobSpec>& s, const std::string& needle) {
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
  EXPECT_EQ(s.status().message().find('\n'), std::string::npos) << "one line";
}

TEST(JobSpecTest, ParsesFullSpec) {
  auto spec = ParseJobSpec(
      Job(kModel,
          R"({"optimizer":{"class_name":"Adam","config":{"learning_rate":0.01}},"loss":"sparse_categorical_crossentropy","metrics":["accuracy"]})",
          R"(,"fit":{"epochs":3,"batch_size":64,"steps_per_epoch":10,"shuffle":false},"data":{"kind":"synthetic"},"strategy":"parameter_server","seed":7,"checkpoint":{"dir":"/tmp/x"})"),
      "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->optimizer.name(), "adam");
  EXPECT_FLOAT_EQ(spec->optimizer.learning_rate(), 0.01f);
  EXPECT_EQ(spec->loss.kind, LossConfig::Kind::kSparseCategoricalCrossentropy);
  EXPECT_EQ(spec->metrics, std::vector<std::string>{"accuracy"});
  EXPECT_EQ(spec->epochs, 3);
  EXPECT_EQ(spec->batch_size, 64);
  EXPECT_EQ(spec->steps_per_epoch, 10);
  EXPECT_FALSE(spec->shuffle);
  EXPECT_EQ(spec->seed, 7u);
  EXPECT_EQ(spec->strategy, StrategyKind::kParameterServer);
  EXPECT_EQ((*spec->data)["kind"], "synthetic");
  EXPECT_EQ((*spec->raw)["checkpoint"]["dir"], "/tmp/x");
  EXPECT_EQ((*spec->model)["config"]["name"], "mlp");
}

TEST(JobSpecTest, DefaultsAndModelFromFile) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream out(dir + "/model.json");
    out << kModel;
  }
  auto spec = ParseJobSpec(Job(R"("model.json")", R"({"loss":"categorical_crossentropy"})"), dir);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->optimizer.name(), "rmsprop");
  EXPECT_FLOAT_EQ(spec->optimizer.learning_rate(), 0.001f);
  EXPECT_EQ(spec->epochs, 1);
  EXPECT_EQ(spec->batch_size, 32);
  EXPECT_TRUE(spec->shuffle);
  EXPECT_EQ((*spec->model)["class_name"], "Sequential");
  EXPECT_EQ(ParseJobSpec(Job(R"("missing.json")", R"({"loss":"mse"})"), dir).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(JobSpecTest, RejectsBadSpecs) {
  ExpectInvalid(ParseJobSpec("{\"model\": ", ""), "malformed JSON");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"optimizer":"adam"})"), ""), "compile.loss");
  ExpectInvalid(ParseJobSpec(R"({"compile":{"loss":"mse"}})", ""), "model");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"fit":{"epochs":"3"})"), ""),
                "fit.epochs");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"fit":{"batch_size":0})"), ""),
                "fit.batch_size");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"fit":{"epoch":3})"), ""),
                "fit.epoch");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse","optimizer":"lbfgs"})"), ""), "lbfgs");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":42})"), ""), "compile.loss");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse","metrics":["auc"]})"), ""), "auc");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"seed":-1)"), ""), "seed");
  ExpectInvalid(
      ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"scale_learning_rate":"yes")"), ""),
      "scale_learning_rate");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"one_hot_labels":1)"), ""),
                "one_hot_labels");
  ExpectInvalid(
      ParseJobSpec(Job(R"({"class_name":"Sequential","config":{"layers":[{"class_name":"InputLayer","config":{"batch_input_shape":[null,4]}},{"class_name":"LSTM","config":{}}]}})",
                       R"({"loss":"mse"})"),
                   ""),
      "LSTM");
  // A misspelled layer key, and a per-sample loss on a per-position output.
  ExpectInvalid(
      ParseJobSpec(Job(R"({"class_name":"Sequential","config":{"layers":[{"class_name":"InputLayer","config":{"batch_input_shape":[null,4]}},{"class_name":"Dense","config":{"units":3,"activaton":"relu"}}]}})",
                       R"({"loss":"mse"})"),
                   ""),
      "unknown config key \"activaton\"");
  ExpectInvalid(
      ParseJobSpec(Job(R"({"class_name":"Sequential","config":{"layers":[{"class_name":"InputLayer","config":{"batch_input_shape":[null,5,4]}},{"class_name":"Dense","config":{"units":3}}]}})",
                       R"({"loss":"sparse_categorical_crossentropy"})"),
                   ""),
      "compile.loss: sparse_categorical_crossentropy needs an output of shape [classes]");
}

TEST(JobSpecTest, UnknownNamesAreNamedNotIgnored) {
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"strategy":"quantum")"), ""),
                "strategy \"quantum\" is not one of default, mirrored");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"nonfinite":"ignore")"), ""),
                "nonfinite \"ignore\" is unknown");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"nonfinite":true)"), ""),
                "nonfinite true is unknown");
}

// A learning rate of 0 used to be replaced by the optimizer's default (the run matched
// lr 0.001 exactly); it is refused, as is one that is not a finite float.
TEST(JobSpecTest, LearningRateZeroOrNonFiniteIsRefused) {
  for (const char* lr : {"0", "-0.1", "1e39", "1e300"}) {
    ExpectInvalid(
        ParseJobSpec(Job(kModel, CompileWithSgdRate(lr)), ""), "learning_rate");
  }
}

TEST(JobSpecTest, NonFinitePolicyTravelsWithTheOptimizer) {
  auto plain = ParseJobSpec(Job(kModel, R"({"loss":"mse"})"), "");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->optimizer.nonfinite(), NONFINITE_REFUSE);
  auto skip = ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"nonfinite":"skip")"), "");
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_EQ(skip->optimizer.nonfinite(), NONFINITE_SKIP);
  auto back = ParseJobSpec(SerializeJobSpec(*skip), "");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->optimizer.nonfinite(), NONFINITE_SKIP);
}

TEST(JobSpecTest, ReplicaOptionsAreRead) {
  auto spec = ParseJobSpec(
      Job(kModel, R"({"loss":"mse"})", R"(,"scale_learning_rate":true,"one_hot_labels":true)"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->scale_learning_rate);
  EXPECT_TRUE(spec->one_hot_labels);
  auto back = ParseJobSpec(SerializeJobSpec(*spec), "");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->scale_learning_rate);
  EXPECT_TRUE(back->one_hot_labels);
  auto plain = ParseJobSpec(Job(kModel, R"({"loss":"mse"})"), "");
  EXPECT_FALSE(plain->scale_learning_rate);
  EXPECT_FALSE(plain->one_hot_labels);
}

TEST(JobSpecTest, SerializeRoundTrips) {
  auto spec = ParseJobSpec(
      Job(kModel,
          R"({"optimizer":{"class_name":"SGD","config":{"learning_rate":0.05,"momentum":0.9,"nesterov":true}},"loss":{"class_name":"CategoricalCrossentropy","config":{"from_logits":true}},"metrics":["acc"]})",
          R"(,"fit":{"epochs":2,"batch_size":16},"data":{"path":"x.idx"},"strategy":"mirrored","seed":123,"checkpoint":{"every_steps":5})"),
      "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto back = ParseJobSpec(SerializeJobSpec(*spec), "/nonexistent");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back->model, *spec->model);
  EXPECT_EQ(back->optimizer.SerializeAsString(), spec->optimizer.SerializeAsString());
  EXPECT_TRUE(back->loss == spec->loss);
  EXPECT_EQ(back->metrics, spec->metrics);
  EXPECT_EQ(back->epochs, spec->epochs);
  EXPECT_EQ(back->batch_size, spec->batch_size);
  EXPECT_EQ(back->steps_per_epoch, spec->steps_per_epoch);
  EXPECT_EQ(back->shuffle, spec->shuffle);
  EXPECT_EQ(back->seed, spec->seed);
  EXPECT_EQ(*back->data, *spec->data);
  EXPECT_EQ(back->strategy, spec->strategy);
  EXPECT_EQ((*back->raw)["checkpoint"], (*spec->raw)["checkpoint"]);
  EXPECT_EQ(SerializeJobSpec(*back), SerializeJobSpec(*spec));
}

// The parameter-server settings are read once, with types, and travel with the job the
// chief sends its workers.
TEST(JobSpecTest, ConsistencyAndPlacementAreTyped) {
  auto spec = ParseJobSpec(
      Job(kModel, R"({"loss":"mse"})",
          R"(,"consistency":{"mode":"sync","timeout_ms":300},"placement":{"strategy":"round_robin","num_shards":2})"),
      "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->consistency.mode(), CONSISTENCY_SYNC);
  EXPECT_EQ(spec->consistency.timeout_ms(), 300);
  EXPECT_EQ(spec->consistency.replicas_to_aggregate(), 0);  // every worker: the chief's
  EXPECT_EQ(spec->placement.strategy, PlacementStrategy::kRoundRobin);
  EXPECT_EQ(spec->placement.num_shards, 2);
  auto back = ParseJobSpec(SerializeJobSpec(*spec), "");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->consistency.SerializeAsString(), spec->consistency.SerializeAsString());
  EXPECT_TRUE(back->placement == spec->placement);

  auto defaults = ParseJobSpec(Job(kModel, R"({"loss":"mse"})"), "");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->consistency.mode(), CONSISTENCY_ASYNC);
  EXPECT_TRUE(defaults->placement == PlacementPolicy());

  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"consistency":{"mode":"lockstep"})"), ""),
                "\"lockstep\"");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"placement":{"strategy":"random"})"), ""),
                "placement.strategy");
}

// "wire_dtype" is read once, typed, travels with the job, and anything else is refused
// with the accepted names.
TEST(JobSpecTest, WireDtypeIsTyped) {
  auto spec = ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"wire_dtype":"bfloat16")"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->wire_precision, WirePrecision::kBfloat16);
  auto back = ParseJobSpec(SerializeJobSpec(*spec), "");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->wire_precision, WirePrecision::kBfloat16);
  auto defaults = ParseJobSpec(Job(kModel, R"({"loss":"mse"})"), "");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->wire_precision, WirePrecision::kFloat32);
  EXPECT_EQ(SerializeJobSpec(*defaults).find("wire_dtype"), std::string::npos);
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"wire_dtype":"int8")"), ""),
                "want float32, bfloat16 or float16");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"wire_dtype":16)"), ""),
                "wire_dtype must be a string");
}

// "overlap" is a bool, off by default, travels with the job, and is refused where it
// would bend the consistency mode: sync, or bounded staleness 0.
TEST(JobSpecTest, OverlapIsABoolRefusedWhereConsistencyMustStayExact) {
  auto spec = ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"overlap":true)"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->overlap);
  auto back = ParseJobSpec(SerializeJobSpec(*spec), "");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->overlap);
  auto defaults = ParseJobSpec(Job(kModel, R"({"loss":"mse"})"), "");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_FALSE(defaults->overlap);
  auto bounded = ParseJobSpec(
      Job(kModel, R"({"loss":"mse"})",
          R"(,"overlap":true,"consistency":{"mode":"bounded_staleness","staleness":1})"),
      "");
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_TRUE(bounded->overlap);
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})", R"(,"overlap":"yes")"), ""),
                "overlap must be true or false");
  ExpectInvalid(ParseJobSpec(Job(kModel, R"({"loss":"mse"})",
                                 R"(,"overlap":true,"consistency":{"mode":"sync"})"),
                             ""),
                "overlap is refused with \"sync\"");
  ExpectInvalid(
      ParseJobSpec(Job(kModel, R"({"loss":"mse"})",
                       R"(,"overlap":true,"consistency":{"mode":"bounded_staleness","staleness":0})"),
                   ""),
      "overlap needs staleness >= 1");
  // Off, it goes with any mode.
  EXPECT_TRUE(ParseJobSpec(Job(kModel, R"({"loss":"mse"})",
                               R"(,"overlap":false,"consistency":{"mode":"sync"})"),
                           "")
                  .ok());
}

// The global batch is split across the replicas (as distribute/distributed_dataset.cc slices it); the
// parameter-server batch is each worker's.
TEST(JobSpecTest, BatchDescriptionsFollowKeras) {
  EXPECT_EQ(DescribeGlobalBatch(64, 1), "global batch 64 (64 per replica x 1)");
  EXPECT_EQ(DescribeGlobalBatch(64, 2), "global batch 64 (32 per replica x 2)");
  EXPECT_EQ(DescribeGlobalBatch(64, 3), "global batch 64 (21-22 per replica x 3)");
  EXPECT_EQ(DescribeGlobalBatch(2, 4), "global batch 2 (0-1 per replica x 4)");
  EXPECT_EQ(DescribePerWorkerBatch(32, 2), "batch 32 per worker (64 per round of 2 workers)");
  EXPECT_EQ(DescribePerWorkerBatch(32, 1), "batch 32 per worker (32 per round of 1 worker)");
}

}  // namespace
}  // namespace pstrain
