#include "common/training/training_state.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "gtest/gtest.h"
#include "distribute/allreduce/in_process_ring.h"
#include "distribute/fit_test_util.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/strategy.h"
#include "nlohmann/json.hpp"
#include "pstrain/fit.h"
#include "pstrain/internal/sync_strategy.h"

namespace pstrain {
namespace {

// Fit drives the public Strategy: the core strategies these tests were written with,
// behind it.
std::unique_ptr<distribute::Strategy> Public(std::unique_ptr<Strategy> core) {
  return distribute::internal::SyncStrategy::Over(std::move(core));
}

std::string TempRoot(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

// Trains `job` in one process, keeping the state after every epoch.
FitResult TrainKeepingStates(const JobSpec& job, const FitData& data,
                             std::vector<TrainingState>* states,
                             const TrainingState* restore = nullptr) {
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  FitOptions options;
  options.restore = restore;
  options.on_checkpoint = [states](const TrainingState& s) {
    states->push_back(s);
    return absl::OkStatus();
  };
  absl::StatusOr<FitResult> result = Fit(job, data, strategy.get(), options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : FitResult();
}

// Through the real format on disk, as the train binary does it.
TrainingState ThroughDisk(const TrainingState& state, const JobSpec& job, const std::string& root) {
  CheckpointWriter writer(root, CheckpointWriter::Options());
  absl::StatusOr<std::string> path =
      writer.Write(CheckpointFromTrainingState(state, job, {{"strategy", "test"}}));
  EXPECT_TRUE(path.ok()) << path.status();
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(root);
  EXPECT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<TrainingState> back = TrainingStateFromCheckpoint(**reader);
  EXPECT_TRUE(back.ok()) << back.status();
  return *std::move(back);
}

TEST(FitCheckpointTest, UsesTheParameterServerChiefsLayout) {
  const JobSpec job = SmallJob(8, 1, true);
  FitData data{Blobs(64, 1), nullptr};
  std::vector<TrainingState> states;
  TrainKeepingStates(job, data, &states);
  ASSERT_EQ(states.size(), 1u);
  const CheckpointContents c = CheckpointFromTrainingState(states[0], job, {{"job_dir", "x"}});
  EXPECT_EQ(c.epoch, 1);
  EXPECT_EQ(c.step, 8);
  EXPECT_EQ((*c.metadata)["global_step"], 8);
  EXPECT_EQ((*c.metadata)["epochs_done"], 1);
  EXPECT_EQ((*c.metadata)["job_dir"], "x");
  EXPECT_EQ((*c.metadata)["optimizer"], "adam");
  const nlohmann::json& kernel = (*c.metadata)["variables"]["dense/kernel"];
  EXPECT_EQ(kernel["iterations"], 8);
  EXPECT_EQ(kernel["slots"], nlohmann::json::array({"momentum", "velocity"}));
  std::vector<std::string> names;
  for (const NamedTensor& t : c.tensors) names.push_back(t.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "dense/kernel/optimizer/velocity"),
            names.end());
  EXPECT_EQ((*c.job_spec)["fit"]["epochs"], 1);
}

TEST(FitCheckpointTest, RoundTripsEveryTensorAndCount) {
  const JobSpec job = SmallJob(8, 2, true);
  FitData data{Blobs(64, 1), nullptr};
  std::vector<TrainingState> states;
  TrainKeepingStates(job, data, &states);
  ASSERT_EQ(states.size(), 2u);
  const TrainingState back = ThroughDisk(states[1], job, TempRoot("roundtrip"));
  EXPECT_EQ(back.epochs_done, 2);
  EXPECT_EQ(back.global_step, 16);
  ASSERT_EQ(back.variables.size(), states[1].variables.size());
  for (const VariableSnapshot& v : states[1].variables) {
    auto it = std::find_if(back.variables.begin(), back.variables.end(),
                           [&](const VariableSnapshot& b) { return b.name == v.name; });
    ASSERT_NE(it, back.variables.end()) << v.name;
    EXPECT_EQ(it->value.values(), v.value.values()) << v.name;
    EXPECT_EQ(it->iterations, v.iterations);
    ASSERT_EQ(it->slots.size(), v.slots.size());
    for (size_t k = 0; k < v.slots.size(); ++k) {
      EXPECT_EQ(it->slots[k].name, v.slots[k].name);
      EXPECT_EQ(it->slots[k].tensor.values(), v.slots[k].tensor.values());
    }
  }
}

// 2 epochs, a checkpoint, then the third: bit-identical to 3 epochs without a stop.
TEST(FitCheckpointTest, ARestoredJobContinuesExactly) {
  const JobSpec job = SmallJob(8, 3, true);
  FitData data{Blobs(80, 2), Blobs(30, 3)};
  std::vector<TrainingState> straight_states;
  const FitResult straight = TrainKeepingStates(job, data, &straight_states);
  ASSERT_EQ(straight.history.size(), 3u);

  std::vector<TrainingState> first;
  JobSpec two = job;
  two.epochs = 2;
  TrainKeepingStates(two, data, &first);
  ASSERT_EQ(first.size(), 2u);
  const TrainingState restored = ThroughDisk(first[1], two, TempRoot("continue"));
  std::vector<TrainingState> second;
  const FitResult resumed = TrainKeepingStates(job, data, &second, &restored);
  ASSERT_EQ(resumed.history.size(), 1u);
  EXPECT_EQ(resumed.history[0].epoch, 3);
  EXPECT_EQ(resumed.history[0].epochs, 3);
  EXPECT_EQ(resumed.steps, straight.steps);
  EXPECT_EQ(MaxAbsDiff(resumed.weights, straight.weights), 0.0);
  EXPECT_EQ(resumed.history[0].loss, straight.history[2].loss);
  EXPECT_EQ(resumed.history[0].val_accuracy, straight.history[2].val_accuracy);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].epochs_done, 3);
  for (size_t i = 0; i < second[0].variables.size(); ++i) {
    EXPECT_EQ(second[0].variables[i].iterations, straight_states[2].variables[i].iterations);
    for (size_t k = 0; k < second[0].variables[i].slots.size(); ++k) {
      EXPECT_EQ(second[0].variables[i].slots[k].tensor.values(),
                straight_states[2].variables[i].slots[k].tensor.values());
    }
  }
}

TEST(FitCheckpointTest, AJobWithEveryEpochDoneTrainsNothing) {
  const JobSpec job = SmallJob(8, 2, true);
  FitData data{Blobs(64, 1), nullptr};
  std::vector<TrainingState> states;
  const FitResult done = TrainKeepingStates(job, data, &states);
  std::vector<TrainingState> again;
  int restored_epoch = -1;
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  FitOptions options;
  options.restore = &states.back();
  options.on_restored = [&](int epochs_done, int64_t) { restored_epoch = epochs_done; };
  options.on_checkpoint = [&](const TrainingState& s) {
    again.push_back(s);
    return absl::OkStatus();
  };
  absl::StatusOr<FitResult> result = Fit(job, data, strategy.get(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(restored_epoch, 2);
  EXPECT_TRUE(result->history.empty());
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(result->steps, done.steps);
  EXPECT_EQ(MaxAbsDiff(result->weights, done.weights), 0.0);
}

TEST(FitCheckpointTest, AStateThatDoesNotFitIsRefusedNamingTheVariable) {
  const JobSpec job = SmallJob(8, 1, true);
  FitData data{Blobs(64, 1), nullptr};
  std::vector<TrainingState> states;
  TrainKeepingStates(job, data, &states);
  std::unique_ptr<distribute::Strategy> strategy = Public(CreateDefaultStrategy());
  FitOptions options;
  TrainingState wrong = states[0];
  wrong.variables[0].value = Tensor({2, 2});
  options.restore = &wrong;
  absl::StatusOr<FitResult> result = Fit(job, data, strategy.get(), options);
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
  EXPECT_NE(result.status().message().find(wrong.variables[0].name), std::string::npos);

  TrainingState missing = states[0];
  missing.variables.pop_back();
  options.restore = &missing;
  result = Fit(job, data, strategy.get(), options);
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();

  TrainingState odd_slot = states[0];
  odd_slot.variables[0].slots.push_back({"accumulator", odd_slot.variables[0].value});
  options.restore = &odd_slot;
  result = Fit(job, data, strategy.get(), options);
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
}

// Runs `job` on two workers over the in-process ring; only rank 0 gets `restore` (as in the
// train binary, where only rank 0 reads the checkpoint) and keeps its states in `states`.
std::vector<absl::StatusOr<FitResult>> TrainTwoWorkers(const JobSpec& job, const FitData& data,
                                                       const TrainingState* restore,
                                                       std::vector<int>* restored_epochs,
                                                       std::vector<TrainingState>* states) {
  InProcessRing ring(2);
  std::vector<absl::StatusOr<FitResult>> results(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      MultiWorkerMirroredOptions mo;
      mo.ring.timeout = absl::Seconds(20);
      mo.ring.chunk_bytes = 64;
      std::unique_ptr<distribute::Strategy> strategy =
          Public(std::make_unique<MultiWorkerMirroredStrategy>(ring.transport(r), mo));
      FitOptions fo;
      fo.restore = r == 0 ? restore : nullptr;
      fo.on_restored = [&, r](int epochs_done, int64_t) { (*restored_epochs)[r] = epochs_done; };
      if (r == 0) {
        fo.on_checkpoint = [states](const TrainingState& s) {
          states->push_back(s);
          return absl::OkStatus();
        };
      }
      fo.sync_check_every = 1;
      results[r] = Fit(job, data, strategy.get(), fo);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(FitCheckpointTest, RankZeroSendsTheRestoredStateToEveryWorker) {
  const JobSpec job = SmallJob(16, 3, true);
  FitData data{Blobs(96, 4), nullptr};
  std::vector<int> epochs(2, -1);
  std::vector<TrainingState> states;
  std::vector<absl::StatusOr<FitResult>> straight =
      TrainTwoWorkers(job, data, nullptr, &epochs, &states);
  ASSERT_TRUE(straight[0].ok()) << straight[0].status();
  EXPECT_EQ(epochs, std::vector<int>({-1, -1}));
  ASSERT_EQ(states.size(), 3u);

  // Continue from the state after epoch 1, which only rank 0 is given.
  std::vector<TrainingState> later;
  std::vector<absl::StatusOr<FitResult>> resumed =
      TrainTwoWorkers(job, data, &states[0], &epochs, &later);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(resumed[r].ok()) << "worker " << r << ": " << resumed[r].status();
    EXPECT_EQ(epochs[r], 1) << "worker " << r;
    ASSERT_EQ(resumed[r]->history.size(), 2u);
    EXPECT_EQ(resumed[r]->history[0].epoch, 2);
    EXPECT_EQ(resumed[r]->steps, straight[r]->steps);
    EXPECT_EQ(MaxAbsDiff(resumed[r]->weights, straight[r]->weights), 0.0) << "worker " << r;
  }
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[1].variables[0].slots[1].tensor.values(),
            states[2].variables[0].slots[1].tensor.values());
}

TEST(FitCheckpointTest, ABadStateOnRankZeroFailsEveryWorker) {
  const JobSpec job = SmallJob(16, 2, true);
  FitData data{Blobs(64, 4), nullptr};
  TrainingState wrong;
  wrong.epochs_done = 1;
  std::vector<int> epochs(2, -1);
  std::vector<TrainingState> states;
  std::vector<absl::StatusOr<FitResult>> results =
      TrainTwoWorkers(job, data, &wrong, &epochs, &states);
  EXPECT_TRUE(absl::IsInvalidArgument(results[0].status())) << results[0].status();
  EXPECT_TRUE(absl::IsFailedPrecondition(results[1].status())) << results[1].status();
}

}  // namespace
}  // namespace pstrain
