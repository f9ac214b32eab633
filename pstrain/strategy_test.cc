// The public custom-loop API in one process: a loop of one's own over Strategy::Run and
// Reduce trains exactly as Fit does, per-replica values come back and combine, and what a
// step function gets wrong is refused before it changes the weights.

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/training/training_state.h"
#include "deploy/local/free_port.h"
#include "gtest/gtest.h"
#include "pstrain/pstrain.h"
#include "distribute/fit_test_util.h"
#include "distribute/mirrored_strategy.h"
#include "pstrain/internal/sync_strategy.h"

namespace pstrain::distribute {
namespace {

std::unique_ptr<Strategy> Make(const std::string& name, const std::string& devices = "") {
  StrategyOptions options;
  absl::StatusOr<StrategyKind> kind = ParseStrategyKind(name);
  EXPECT_TRUE(kind.ok()) << kind.status();
  if (!kind.ok()) return nullptr;
  options.strategy = *kind;
  options.devices = devices;
  absl::StatusOr<std::unique_ptr<Strategy>> s = CreateStrategy(options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

absl::StatusOr<StepResult> TrainStep(DistributedModel& model, const ReplicaContext& ctx,
                                     const ReplicaBatch& batch) {
  PS_ASSIGN_OR_RETURN(Gradients grads, model.ComputeGradients(ctx, batch));
  const StepResult metrics = grads.metrics;
  PS_RETURN_IF_ERROR(model.ApplyGradients(ctx, std::move(grads)));
  return metrics;
}

// The custom loop of examples/custom_loop.cc over `epochs` passes of `data`.
absl::StatusOr<std::vector<Tensor>> CustomLoop(Strategy& strategy, const JobSpec& job,
                                               std::shared_ptr<const Dataset> data,
                                               StepResult* last_epoch) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<DistributedModel> model,
                      strategy.CreateModel(ModelOptions::FromJobSpec(job)));
  DistributedDatasetOptions o;
  o.global_batch_size = job.batch_size;
  o.shuffle = job.shuffle;
  o.seed = job.seed;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<DistributedDataset> dataset,
                      strategy.ExperimentalDistributeDataset(data, o));
  auto step_fn = [&](const ReplicaContext& ctx, const ReplicaBatch& b) {
    return TrainStep(*model, ctx, b);
  };
  for (int epoch = 0; epoch < job.epochs; ++epoch) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<DistributedIterator> it, dataset->MakeIterator(epoch));
    *last_epoch = StepResult();
    while (true) {
      absl::StatusOr<DistributedBatch> batch = it->Next();
      if (absl::IsOutOfRange(batch.status())) break;
      PS_RETURN_IF_ERROR(batch.status());
      PS_ASSIGN_OR_RETURN(PerReplica<StepResult> per_replica, strategy.Run(step_fn, *batch));
      PS_ASSIGN_OR_RETURN(StepResult step, strategy.Reduce(ReduceOp::kSum, per_replica));
      last_epoch->loss_sum += step.loss_sum;
      last_epoch->correct += step.correct;
      last_epoch->samples += step.samples;
    }
  }
  return model->GetWeights();
}

TEST(StrategyTest, ACustomLoopTrainsExactlyAsFitUnderDefaultAndMirrored) {
  const JobSpec job = SmallJob(/*batch_size=*/30, /*epochs=*/3, /*shuffle=*/true);
  FitData data;
  data.train = Blobs(300, 1);
  for (const std::string devices : {"", "cpu:0,cpu:1,cpu:2"}) {
    std::unique_ptr<Strategy> strategy = Make(devices.empty() ? "default" : "mirrored", devices);
    ASSERT_NE(strategy, nullptr);
    StepResult last;
    absl::StatusOr<std::vector<Tensor>> custom = CustomLoop(*strategy, job, data.train, &last);
    ASSERT_TRUE(custom.ok()) << custom.status();
    std::unique_ptr<::pstrain::Strategy> core;
    if (devices.empty()) {
      core = CreateDefaultStrategy();
    } else {
      core = *CreateMirroredStrategy(devices);
    }
    std::unique_ptr<Strategy> over_core = internal::SyncStrategy::Over(std::move(core));
    absl::StatusOr<FitResult> fit = Fit(job, data, over_core.get(), FitOptions());
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_EQ(MaxAbsDiff(*custom, fit->weights), 0.0) << devices;
    ASSERT_EQ(fit->history.size(), 3u);
    EXPECT_EQ(last.samples, 300);
    EXPECT_NEAR(last.loss_sum / last.samples, fit->history.back().loss, 1e-9) << devices;
    EXPECT_GT(static_cast<double>(last.correct) / last.samples, 0.9) << devices;
  }
}

TEST(StrategyTest, RunReturnsEveryReplicasValueAndReduceCombinesThem) {
  std::unique_ptr<Strategy> strategy = Make("mirrored", "cpu:0,cpu:1,cpu:2");
  ASSERT_NE(strategy, nullptr);
  EXPECT_EQ(strategy->kind(), StrategyKind::kMirrored);
  EXPECT_EQ(strategy->num_replicas_in_sync(), 3);
  EXPECT_TRUE(strategy->is_chief());
  DistributedDatasetOptions o;
  o.global_batch_size = 10;
  o.shuffle = false;
  auto dataset = strategy->ExperimentalDistributeDataset(Blobs(10, 2), o);
  ASSERT_TRUE(dataset.ok());
  auto batch = (*(*dataset)->MakeIterator(0))->Next();
  ASSERT_TRUE(batch.ok());
  auto per_replica = strategy->Run(
      [](const ReplicaContext& ctx, const ReplicaBatch& b) -> absl::StatusOr<std::vector<float>> {
        return std::vector<float>{static_cast<float>(ctx.replica_id_in_sync_group),
                                  static_cast<float>(b.rows()),
                                  static_cast<float>(ctx.num_replicas_in_sync)};
      },
      *batch);
  ASSERT_TRUE(per_replica.ok()) << per_replica.status();
  ASSERT_EQ(per_replica->values.size(), 3u);
  EXPECT_EQ(per_replica->values[2], (std::vector<float>{2, 4, 3}));  // rows 6..9
  auto sum = strategy->Reduce(ReduceOp::kSum, *per_replica);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, (std::vector<float>{3, 10, 9}));
  auto mean = strategy->Reduce(ReduceOp::kMean, *per_replica);
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(*mean, (std::vector<float>{1, 10.0f / 3, 3}));
  // Values of different sizes do not add up.
  PerReplica<std::vector<float>> ragged;
  ragged.values = {{1, 2}, {1, 2, 3}, {1, 2}};
  EXPECT_TRUE(absl::IsInvalidArgument(strategy->Reduce(ReduceOp::kSum, ragged).status()));
  // An error in one replica is Run's, and names it.
  auto failed = strategy->Run(
      [](const ReplicaContext& ctx, const ReplicaBatch&) -> absl::StatusOr<int> {
        if (ctx.replica_id_in_sync_group == 1) return absl::InternalError("replica 1 broke");
        return 0;
      },
      *batch);
  EXPECT_EQ(failed.status().message(), "replica 1 broke");
}

class StepErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    strategy_ = Make("mirrored", "cpu:0,cpu:1");
    ASSERT_NE(strategy_, nullptr);
    auto model = strategy_->CreateModel(ModelOptions::FromJobSpec(SmallJob(8, 1, false)));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    DistributedDatasetOptions o;
    o.global_batch_size = 8;
    auto dataset = strategy_->ExperimentalDistributeDataset(Blobs(8, 3), o);
    ASSERT_TRUE(dataset.ok());
    batch_ = *(*(*dataset)->MakeIterator(0))->Next();
    before_ = *model_->GetWeights();
  }
  void ExpectUnchanged() { EXPECT_EQ(MaxAbsDiff(*model_->GetWeights(), before_), 0.0); }

  std::unique_ptr<Strategy> strategy_;
  std::unique_ptr<DistributedModel> model_;
  DistributedBatch batch_;
  std::vector<Tensor> before_;
};

TEST_F(StepErrorsTest, AReplicaThatDoesNotApplyItsGradientsFailsTheStep) {
  auto run = strategy_->Run(
      [&](const ReplicaContext& ctx, const ReplicaBatch& b) -> absl::StatusOr<int> {
        PS_ASSIGN_OR_RETURN(Gradients g, model_->ComputeGradients(ctx, b));
        if (ctx.replica_id_in_sync_group == 0) {
          PS_RETURN_IF_ERROR(model_->ApplyGradients(ctx, std::move(g)));
        }
        return 0;
      },
      batch_);
  EXPECT_TRUE(absl::IsFailedPrecondition(run.status())) << run.status();
  EXPECT_TRUE(absl::StrContains(run.status().message(), "replica 1 did not apply")) << run.status();
  ExpectUnchanged();
  // The next step starts clean and trains.
  auto trained = strategy_->Run(
      [&](const ReplicaContext& ctx, const ReplicaBatch& b) { return TrainStep(*model_, ctx, b); },
      batch_);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_GT(MaxAbsDiff(*model_->GetWeights(), before_), 0.0);
}

TEST_F(StepErrorsTest, GradientsOfAnotherReplicaOrShapeAreRefused) {
  auto swapped = strategy_->Run(
      [&](const ReplicaContext& ctx, const ReplicaBatch& b) -> absl::StatusOr<int> {
        PS_ASSIGN_OR_RETURN(Gradients g, model_->ComputeGradients(ctx, b));
        g.replica = 1 - g.replica;
        PS_RETURN_IF_ERROR(model_->ApplyGradients(ctx, std::move(g)));
        return 0;
      },
      batch_);
  EXPECT_TRUE(absl::IsInvalidArgument(swapped.status())) << swapped.status();
  auto reshaped = strategy_->Run(
      [&](const ReplicaContext& ctx, const ReplicaBatch& b) -> absl::StatusOr<int> {
        PS_ASSIGN_OR_RETURN(Gradients g, model_->ComputeGradients(ctx, b));
        g.values[0] = Tensor({3, 3});
        PS_RETURN_IF_ERROR(model_->ApplyGradients(ctx, std::move(g)));
        return 0;
      },
      batch_);
  EXPECT_TRUE(absl::IsInvalidArgument(reshaped.status())) << reshaped.status();
  EXPECT_TRUE(absl::StrContains(reshaped.status().message(), "dense/kernel")) << reshaped.status();
  ExpectUnchanged();
}

TEST_F(StepErrorsTest, TheStepFunctionsGradientsAreTheOnesApplied) {
  // Zeroed gradients: Adam's first step from zero moments moves nothing.
  auto run = strategy_->Run(
      [&](const ReplicaContext& ctx, const ReplicaBatch& b) -> absl::StatusOr<int> {
        PS_ASSIGN_OR_RETURN(Gradients g, model_->ComputeGradients(ctx, b));
        for (Tensor& t : g.values) {
          for (float& v : t.values()) v = 0;
        }
        PS_RETURN_IF_ERROR(model_->ApplyGradients(ctx, std::move(g)));
        return 0;
      },
      batch_);
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectUnchanged();
}

TEST_F(StepErrorsTest, ABatchSplitForOtherReplicasIsRefused) {
  std::unique_ptr<Strategy> one = Make("default");
  ASSERT_NE(one, nullptr);
  DistributedDatasetOptions o;
  o.global_batch_size = 8;
  auto single = *(*(*one->ExperimentalDistributeDataset(Blobs(8, 3), o))->MakeIterator(0))->Next();
  auto run = strategy_->Run(
      [&](const ReplicaContext& ctx, const ReplicaBatch& b) { return TrainStep(*model_, ctx, b); },
      single);
  EXPECT_TRUE(absl::IsInvalidArgument(run.status())) << run.status();
  ExpectUnchanged();
}

TEST(StrategyTest, ParameterServerStepsRunThroughTheCoordinator) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(3);
  ASSERT_TRUE(ports.ok());
  StrategyOptions options;
  options.strategy = StrategyKind::kParameterServer;
  options.tf_config = absl::StrCat(
      R"({"cluster":{"chief":["localhost:)", (*ports)[0], R"("],"ps":["localhost:)", (*ports)[1],
      R"("],"worker":["localhost:)", (*ports)[2], R"("]},"task":{"type":"chief","index":0}})");
  absl::StatusOr<std::unique_ptr<Strategy>> chief = CreateStrategy(options);
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ((*chief)->name(), "parameter_server");
  EXPECT_EQ((*chief)->num_replicas_in_sync(), 1);
  EXPECT_TRUE((*chief)->is_chief());
  DistributedBatch batch;
  batch.replicas.resize(1);
  auto run = (*chief)->Run(
      [](const ReplicaContext&, const ReplicaBatch&) -> absl::StatusOr<int> { return 1; }, batch);
  EXPECT_TRUE(absl::IsFailedPrecondition(run.status())) << run.status();
  EXPECT_TRUE(absl::StrContains(run.status().message(), "ClusterCoordinator::Schedule"));
  EXPECT_TRUE(absl::IsFailedPrecondition((*chief)->JoinServer()));
  auto coordinator = ClusterCoordinator::Create(chief->get());
  ASSERT_TRUE(coordinator.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition((*coordinator)->Serve()));
  // Only the parameter_server strategy has a coordinator.
  std::unique_ptr<Strategy> sync = Make("default");
  EXPECT_TRUE(absl::IsInvalidArgument(ClusterCoordinator::Create(sync.get()).status()));
}

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

// A parameter_server chief and its ps in this process (real gRPC servers on free ports):
// Save writes the variables as the ps holds them, in the layout every pstrain trainer
// reads; Restore puts the newest checkpoint of the folder onto the ps and gives back its
// progress; the other strategies and a folder without checkpoints are refused.
TEST(StrategyTest, AParameterServerChiefSavesAndRestoresTheVariablesOnThePs) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(3);
  ASSERT_TRUE(ports.ok());
  auto tf_config = [&](const std::string& type) {
    return absl::StrCat(R"({"cluster":{"chief":["localhost:)", (*ports)[0],
                        R"("],"ps":["localhost:)", (*ports)[1], R"("],"worker":["localhost:)",
                        (*ports)[2], R"("]},"task":{"type":")", type, R"(","index":0}})");
  };
  StrategyOptions options;
  options.strategy = StrategyKind::kParameterServer;
  options.tf_config = tf_config("ps");
  absl::StatusOr<std::unique_ptr<Strategy>> ps = CreateStrategy(options);
  ASSERT_TRUE(ps.ok()) << ps.status();
  // Serves until the chief's strategy, destroyed, says the job is done.
  absl::Status served = absl::UnknownError("not run");
  std::thread serving([&] { served = (*ps)->JoinServer(); });
  {
    options.tf_config = tf_config("chief");
    absl::StatusOr<std::unique_ptr<Strategy>> chief = CreateStrategy(options);
    ASSERT_TRUE(chief.ok()) << chief.status();
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/ps_checkpoints");
    EXPECT_TRUE(absl::IsFailedPrecondition((*chief)->Save(dir, {}).status()));  // no model
    auto model = (*chief)->CreateModel(ModelOptions::FromJobSpec(SmallJob(30, 1, true)));
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_TRUE(absl::IsNotFound((*chief)->Restore(dir).status()));

    absl::StatusOr<std::vector<Tensor>> initial = (*model)->GetWeights();
    ASSERT_TRUE(initial.ok()) << initial.status();
    TrainingProgress progress;
    progress.epochs_done = 2;
    progress.global_step = 40;
    absl::StatusOr<std::string> path = (*chief)->Save(dir, progress);
    ASSERT_TRUE(path.ok()) << path.status();
    absl::StatusOr<std::unique_ptr<CheckpointReader>> saved = CheckpointReader::Open(dir);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ((*saved)->path(), *path);
    EXPECT_EQ((*saved)->epoch(), 2);
    EXPECT_EQ((*saved)->step(), 40);
    absl::StatusOr<TrainingState> state = TrainingStateFromCheckpoint(**saved);
    ASSERT_TRUE(state.ok()) << state.status();
    // The checkpoint lists the variables by name; the model in its own order.
    const std::vector<VariableSpec>& specs = (*model)->variables();
    auto saved_value = [&](const TrainingState& s, size_t i) -> std::vector<float> {
      for (const VariableSnapshot& v : s.variables) {
        if (v.name == specs[i].name) return Values(v.value);
      }
      ADD_FAILURE() << specs[i].name << " is not in the checkpoint";
      return {};
    };
    ASSERT_EQ(state->variables.size(), initial->size());
    for (size_t i = 0; i < initial->size(); ++i) {
      EXPECT_EQ(saved_value(*state, i), Values((*initial)[i])) << specs[i].name;
      EXPECT_EQ(state->variables[i].slots.size(), 2u) << i;  // Adam's
    }

    // A newer checkpoint in the folder, every value moved by one: Restore takes it.
    TrainingState newer = *state;
    newer.epochs_done = 3;
    newer.global_step = 99;
    for (VariableSnapshot& v : newer.variables) {
      for (float& x : v.value.values()) x += 1.0f;
    }
    CheckpointWriter writer(dir, CheckpointWriter::Options());
    ASSERT_TRUE(writer.Write(CheckpointFromTrainingState(newer, SmallJob(30, 1, true), {})).ok());
    absl::StatusOr<TrainingProgress> restored = (*chief)->Restore(dir);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(restored->epochs_done, 3);
    EXPECT_EQ(restored->global_step, 99);
    absl::StatusOr<std::vector<Tensor>> now = (*model)->GetWeights();
    ASSERT_TRUE(now.ok()) << now.status();
    ASSERT_EQ(now->size(), newer.variables.size());
    for (size_t i = 0; i < now->size(); ++i) {
      EXPECT_EQ(Values((*now)[i]), saved_value(newer, i)) << specs[i].name;
      EXPECT_NE(Values((*now)[i]), Values((*initial)[i])) << specs[i].name;
    }
  }
  serving.join();
  EXPECT_TRUE(served.ok()) << served;

  // The synchronous strategies' checkpoints are Fit's.
  std::unique_ptr<Strategy> sync = Make("default");
  EXPECT_TRUE(absl::IsUnimplemented(sync->Save("/tmp/unused", {}).status()));
  EXPECT_TRUE(absl::IsUnimplemented(sync->Restore("/tmp/unused").status()));
}

}  // namespace
}  // namespace pstrain::distribute
