// The coordinator against a real VariableStore (in-process ps client) and workers that
// answer RunSteps with known figures: what it sends the ps and how it adds up an epoch.

#include "chief/coordinator.h"

#include <atomic>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
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
  EXPECT_TRUE(membership.Register({Role::kPs, 0}, "h:2", 1).ok());
  EXPECT_TRUE(membership.Register({Role::kWorker, 0}, "h:3", 1).ok());
  EXPECT_TRUE(membership.Register({Role::kWorker, 1}, "h:4", 1).ok());
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

// A worker whose shards have 3 one-step chunks each; each RunSteps takes 10 ms (so both
// workers hold a chunk at once) and is recorded. `fail_first` is what its first RunSteps
// returns instead (OK: none); after an UNAVAILABLE it is gone: every call fails so.
class ScriptedWorker final : public WorkerClient {
 public:
  ScriptedWorker(std::string name, absl::Status fail_first)
      : name_(std::move(name)), fail_first_(std::move(fail_first)) {}
  std::string name() const override { return name_; }
  absl::StatusOr<RunStepsResponse> RunSteps(const RunStepsRequest& request) override {
    absl::SleepFor(absl::Milliseconds(10));
    absl::MutexLock lock(&mu_);
    if (gone_) return absl::UnavailableError(name_ + ": connection refused");
    if (calls_++ == 0 && !fail_first_.ok()) {
      gone_ = absl::IsUnavailable(fail_first_);
      return fail_first_;
    }
    answered_.push_back({request.epoch(), request.shard_index(), request.first_step()});
    generations_.insert(request.ps_generation());
    RunStepsResponse response;
    response.set_steps(request.steps());
    response.set_samples(10);
    response.set_loss_sum(1.0);
    response.set_end_of_data(request.first_step() + request.steps() >= 3);
    return response;
  }
  absl::StatusOr<WorkerStatusResponse> GetStatus() override {
    absl::MutexLock lock(&mu_);
    if (gone_) return absl::UnavailableError(name_ + ": connection refused");
    WorkerStatusResponse status;
    status.set_ready(true);
    return status;
  }
  absl::Status Shutdown(const std::string&) override { return absl::OkStatus(); }

  struct Chunk {
    int epoch, shard;
    int64_t first_step;
    bool operator<(const Chunk& o) const {
      return std::tie(epoch, shard, first_step) < std::tie(o.epoch, o.shard, o.first_step);
    }
    bool operator==(const Chunk& o) const {
      return std::tie(epoch, shard, first_step) == std::tie(o.epoch, o.shard, o.first_step);
    }
  };
  std::vector<Chunk> answered() const {
    absl::MutexLock lock(&mu_);
    return answered_;
  }
  std::set<int64_t> generations() const {
    absl::MutexLock lock(&mu_);
    return generations_;
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  const std::string name_;
  const absl::Status fail_first_;
  mutable absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Chunk> answered_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> generations_ ABSL_GUARDED_BY(mu_);
};

struct CountingObserver : TrainingObserver {
  void OnTaskLost(const std::string& type, const std::string& task) override {
    lost.push_back(type + " " + task);
  }
  void OnPsRecovered() override { ++ps_recovered; }
  std::vector<std::string> lost;
  std::atomic<int> ps_recovered{0};
};

// Runs a 2-epoch job (2 shards of 3 one-step chunks each) on `w0` and `w1`.
absl::Status RunScripted(ScriptedWorker* w0, ScriptedWorker* w1, CountingObserver* observer) {
  std::string text = kJob;
  text.replace(text.find("SCALE"), 5, "false");
  absl::StatusOr<JobSpec> job = ParseJobSpec(text, ".");
  EXPECT_TRUE(job.ok()) << job.status();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  auto model = Model::FromKerasJson(job->model, backend.get());
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->SetLoss(job->loss).ok());
  const ClusterSpec cluster =
      *ClusterSpec::Create({{"chief", {"h:1"}}, {"ps", {"h:2"}}, {"worker", {"h:3", "h:4"}}});
  Membership membership(cluster);
  EXPECT_TRUE(membership.Register({Role::kPs, 0}, "h:2", 1).ok());
  EXPECT_TRUE(membership.Register({Role::kWorker, 0}, "h:3", 1).ok());
  EXPECT_TRUE(membership.Register({Role::kWorker, 1}, "h:4", 1).ok());
  VariableStore store;
  std::unique_ptr<PsClient> ps = CreateLocalPsClient(0, &store);
  Coordinator::Options options;
  options.ps_addresses = {"h:2"};
  options.steps_per_call = 1;
  options.observer = observer;
  Coordinator coordinator(options, &*job, model->get(), &membership, {ps.get()}, {w0, w1},
                          nullptr, nullptr, [](const EpochSummary&) {});
  return coordinator.Run();
}

// Every chunk of both epochs, answered once.
std::multiset<ScriptedWorker::Chunk> AllAnswered(const ScriptedWorker& w0,
                                                 const ScriptedWorker& w1) {
  std::multiset<ScriptedWorker::Chunk> all;
  for (const ScriptedWorker* w : {&w0, &w1}) {
    for (const ScriptedWorker::Chunk& c : w->answered()) all.insert(c);
  }
  return all;
}

std::multiset<ScriptedWorker::Chunk> EveryChunkOnce() {
  std::multiset<ScriptedWorker::Chunk> every;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int shard = 0; shard < 2; ++shard) {
      for (int64_t step = 0; step < 3; ++step) every.insert({epoch, shard, step});
    }
  }
  return every;
}

// Worker 1 is killed in its first chunk (shard 1 from step 0): that chunk runs again once,
// on worker 0, which runs everything else too; worker 1 is asked nothing more.
TEST(CoordinatorTest, AKilledWorkersChunkRunsOnceMoreOnTheOtherWorker) {
  ScriptedWorker w0("worker task 0", absl::OkStatus());
  ScriptedWorker w1("worker task 1", absl::UnavailableError("worker task 1: connection reset"));
  CountingObserver observer;
  const absl::Status status = RunScripted(&w0, &w1, &observer);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(w1.calls(), 1);
  EXPECT_TRUE(w1.answered().empty());
  EXPECT_EQ(AllAnswered(w0, w1), EveryChunkOnce());
  EXPECT_EQ(observer.lost, std::vector<std::string>{"worker worker task 1"});
  EXPECT_EQ(observer.ps_recovered, 0);
}

// Both workers report a failed ps for their first chunk: the ps is recovered once (every
// ps answers and holds its variables), both chunks run again, and every chunk after the
// recovery carries the new ps generation (the workers pull afresh).
TEST(CoordinatorTest, AFailedPsIsRecoveredOnceAndItsChunksRunAgain) {
  const absl::Status ps_failed =
      absl::AbortedError("a ps failed: ps task 0 (h:2): connection refused");
  ScriptedWorker w0("worker task 0", ps_failed);
  ScriptedWorker w1("worker task 1", ps_failed);
  CountingObserver observer;
  const absl::Status status = RunScripted(&w0, &w1, &observer);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(observer.ps_recovered, 1);
  EXPECT_TRUE(observer.lost.empty());
  EXPECT_EQ(AllAnswered(w0, w1), EveryChunkOnce());
  // Both failed calls came before the recovery; every answered one after it.
  EXPECT_EQ(w0.generations().size(), 1u);
  EXPECT_EQ(w0.generations(), w1.generations());
}

// A worker's own error (not a lost worker, not a failed ps) fails the job with it.
TEST(CoordinatorTest, AWorkersOwnErrorFailsTheJob) {
  ScriptedWorker w0("worker task 0", absl::InvalidArgumentError("worker task 0: bad shard"));
  ScriptedWorker w1("worker task 1", absl::OkStatus());
  CountingObserver observer;
  const absl::Status status = RunScripted(&w0, &w1, &observer);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "bad shard")) << status;
}

}  // namespace
}  // namespace pstrain
