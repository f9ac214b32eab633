// The coordinator against a real VariableStore (in-process ps client) and workers that
// answer RunSteps with known figures: what it sends the ps and how it adds up an epoch.

#include "chief/coordinator.h"

#include "common/math/cpu_backend.h"
#include "gtest/gtest.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

// A worker that trains nothing: every RunSteps runs one step whose figures depend only on
// the shard (whichever worker the coordinator gives it to), and ends that shard's data.
// Shard 0: 10 samples, loss sum 5, 3 correct; shard 1: 30 samples, loss sum 3, 27 correct.
class FixedFiguresWorker final : public WorkerClient {
 public:
  std::string name() const override { return "fixed worker"; }
  absl::StatusOr<RunStepsResponse> RunSteps(const RunStepsRequest& request) override {
    const bool first = request.shard_index() == 0;
    RunStepsResponse response;
    response.set_steps(1);
    response.set_samples(first ? 10 : 30);
    response.set_loss_sum(first ? 5.0 : 3.0);
    response.set_correct(first ? 3 : 27);
    response.set_end_of_data(true);
    return response;
  }
  absl::StatusOr<WorkerStatusResponse> GetStatus() override {
    WorkerStatusResponse status;
    status.set_ready(true);
    return status;
  }
  absl::Status Shutdown(const std::string&) override { return absl::OkStatus(); }
};

constexpr char kJob[] = R"({
  "model": {"class_name": "Sequential", "config": {"layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
    {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}},
  "compile": {"optimizer": {"class_name": "SGD", "config": {"learning_rate": 0.1}},
              "loss": "sparse_categorical_crossentropy"},
  "fit": {"epochs": 2},
  "scale_learning_rate": SCALE
})";

struct Outcome {
  absl::Status status;
  std::vector<EpochSummary> epochs;
  OptimizerConfig ps_optimizer;
};

Outcome RunWithTwoWorkers(bool scale_learning_rate) {
  std::string text = kJob;
  text.replace(text.find("SCALE"), 5, scale_learning_rate ? "true" : "false");
  absl::StatusOr<JobSpec> job = ParseJobSpec(text, ".");
  EXPECT_TRUE(job.ok()) << job.status();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  auto model = Model::FromKerasJson(job->model, backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->SetLoss(job->loss).ok());

  const ClusterSpec cluster =
      *ClusterSpec::Create({{"chief", {"h:1"}}, {"ps", {"h:2"}}, {"worker", {"h:3", "h:4"}}});
  Membership membership(cluster);
  EXPECT_TRUE(membership.Register("ps", 0, "h:2", 1).ok());
  EXPECT_TRUE(membership.Register("worker", 0, "h:3", 1).ok());
  EXPECT_TRUE(membership.Register("worker", 1, "h:4", 1).ok());
  VariableStore store;
  std::unique_ptr<PsClient> ps = CreateLocalPsClient(0, &store);
  FixedFiguresWorker w0, w1;
  Coordinator::Options options;
  options.ps_addresses = {"h:2"};
  Outcome outcome;
  Coordinator coordinator(options, &*job, model->get(), &membership, {ps.get()}, {&w0, &w1},
                          nullptr, nullptr,
                          [&](const EpochSummary& s) { outcome.epochs.push_back(s); });
  outcome.status = coordinator.Run();
  outcome.ps_optimizer = store.optimizer_config();
  return outcome;
}

TEST(CoordinatorTest, EpochFiguresAreWeightedBySamples) {
  Outcome outcome = RunWithTwoWorkers(false);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  ASSERT_EQ(outcome.epochs.size(), 2u);
  // (5 + 3) / 40 and (3 + 27) / 40, not the mean of the two shards' own averages.
  EXPECT_DOUBLE_EQ(outcome.epochs[0].loss, 0.2);
  EXPECT_DOUBLE_EQ(outcome.epochs[0].accuracy, 0.75);
  EXPECT_EQ(outcome.epochs[0].samples, 40);
  EXPECT_EQ(outcome.epochs[1].epoch, 2);
}

TEST(CoordinatorTest, ScaleLearningRateMultipliesByTheNumberOfWorkers) {
  EXPECT_FLOAT_EQ(RunWithTwoWorkers(false).ps_optimizer.learning_rate(), 0.1f);
  EXPECT_FLOAT_EQ(RunWithTwoWorkers(true).ps_optimizer.learning_rate(), 0.2f);
}

}  // namespace
}  // namespace pstrain
