// PsTrainer against real VariableStores through in-process clients: no network, but the
// real store, optimizer and model.

#include "ps_server/client/ps_trainer.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/math/cpu_backend.h"
#include "common/sharding/shard_layout.h"
#include "common/sharding/test_placement.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_server/client/ps_trainer_metrics.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

// 4 inputs -> Dense(8, relu) -> Dense(3, softmax): small enough to learn in a few steps.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
  {"class_name": "Dense", "config": {"name": "hidden", "units": 8, "activation": "relu"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}}]}})";

// Creates `model`'s variables on two stores as `placement` says, each shard with its rows
// of the initial values for `seed`, and returns in-process clients for them.
std::vector<std::unique_ptr<PsClient>> CreateOnStores(
    const Model& model, const std::vector<VariablePlacementEntry>& placement, uint64_t seed,
    const OptimizerConfig& optimizer, VariableStore* stores) {
  std::vector<VariableShape> shapes;
  for (const VariableSpec& v : model.variables()) shapes.push_back({v.name, v.shape});
  auto layout = ResolveLayout(shapes, placement, 2);
  EXPECT_TRUE(layout.ok()) << layout.status();
  std::vector<Tensor> initial = model.InitialValues(seed);
  std::vector<std::vector<NamedTensor>> per_ps(2);
  for (size_t i = 0; i < layout->size(); ++i) {
    for (const VariablePlacementEntry& shard : (*layout)[i].shards) {
      per_ps[shard.ps_index()].push_back({shard.name(), *SliceShard(initial[i], shard)});
    }
  }
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int p = 0; p < 2; ++p) {
    EXPECT_TRUE(stores[p].CreateVariables(per_ps[p], optimizer).ok());
    clients.push_back(CreateLocalPsClient(p, &stores[p]));
  }
  return clients;
}

class PsTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = CreateCpuBackend();
    auto model = Model::FromKerasJsonText(kModel, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    ASSERT_TRUE(model_->SetLoss(LossConfig{}).ok());
    for (const VariableSpec& v : model_->variables()) shapes_.push_back({v.name, v.shape});
    placement_ = RoundRobinShardsForTest(shapes_, 2, 1);
    OptimizerConfig adam;
    adam.set_name("adam");
    adam.set_learning_rate(0.02f);
    clients_ = CreateOnStores(*model_, placement_, 7, adam, stores_);
  }

  std::vector<PsClient*> Clients() { return {clients_[0].get(), clients_[1].get()}; }

  // Class = index of the largest of the first three features.
  static void MakeBatch(int n, uint32_t seed, Tensor* x, Tensor* y) {
    *x = Tensor({n, 4});
    *y = Tensor({n});
    uint32_t state = seed;
    for (int i = 0; i < n; ++i) {
      int best = 0;
      for (int j = 0; j < 4; ++j) {
        state = state * 1664525u + 1013904223u;
        x->data()[i * 4 + j] = static_cast<float>(state >> 8) / (1 << 24);
        if (j < 3 && x->data()[i * 4 + j] > x->data()[i * 4 + best]) best = j;
      }
      y->data()[i] = static_cast<float>(best);
    }
  }

  // 200 steps of `trainer` on one batch of 64; the mean loss of the first and the last.
  static void Train200Steps(PsTrainer* trainer, double* first, double* last) {
    Tensor x, y;
    MakeBatch(64, 3, &x, &y);
    for (int step = 0; step < 200; ++step) {
      auto result = trainer->Step(x, y);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->samples, 64);
      if (step == 0) *first = result->loss_sum / 64;
      *last = result->loss_sum / 64;
    }
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<VariableShape> shapes_;
  std::vector<VariablePlacementEntry> placement_;
  VariableStore stores_[2];
  std::vector<std::unique_ptr<PsClient>> clients_;
};

TEST_F(PsTrainerTest, StepsPushToEveryPsAndLowerTheLoss) {
  auto trainer = PsTrainer::Create(model_.get(), Clients(), placement_, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  double first = 0, last = 0;
  ASSERT_NO_FATAL_FAILURE(Train200Steps(trainer->get(), &first, &last));
  EXPECT_LT(last, 0.5 * first);
  // Every variable on both ps tasks was updated once per step.
  for (int p = 0; p < 2; ++p) {
    for (const auto& info : stores_[p].List()) EXPECT_EQ(info.version, 200) << info.name;
  }
}

// A reusable barrier for PushPull calls across clients: each call waits (up to 5 s) until
// `expected` calls have arrived, then all go on together.
struct PushBarrier {
  explicit PushBarrier(int expected) : expected(expected) {}
  const int expected;
  absl::Mutex mu;
  int arrived ABSL_GUARDED_BY(mu) = 0;
  int64_t rounds ABSL_GUARDED_BY(mu) = 0;  // times `expected` calls met
};

// Forwards every call to `inner`; PushPull meets the others at `barrier` first and fails
// (DEADLINE_EXCEEDED) when they never come. Not owned: inner, barrier.
class BarrierPsClient : public PsClient {
 public:
  BarrierPsClient(PsClient* inner, PushBarrier* barrier) : inner_(inner), barrier_(barrier) {}
  std::string name() const override { return inner_->name(); }
  absl::Status CreateVariables(std::vector<NamedTensor> variables, const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency) override {
    return inner_->CreateVariables(std::move(variables), optimizer, consistency);
  }
  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names,
                                           std::vector<int64_t>* versions) override {
    return inner_->Pull(names, versions);
  }
  absl::Status Push(absl::Span<const NamedTensor> gradients, int64_t step) override {
    return inner_->Push(gradients, step);
  }
  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                               const PushContext& context,
                                               std::vector<int64_t>* versions) override {
    {
      absl::MutexLock lock(&barrier_->mu);
      const int64_t round = barrier_->rounds;
      if (++barrier_->arrived == barrier_->expected) {
        barrier_->arrived = 0;
        ++barrier_->rounds;
      } else {
        auto met = [this, round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(barrier_->mu) {
          return barrier_->rounds != round;
        };
        if (!barrier_->mu.AwaitWithTimeout(absl::Condition(&met), absl::Seconds(5))) {
          --barrier_->arrived;
          return absl::DeadlineExceededError(
              absl::StrCat(name(), ": pushed alone; the other ps's push never started"));
        }
      }
    }
    return inner_->PushPull(gradients, context, versions);
  }
  absl::StatusOr<PsStatusResponse> GetStatus() override { return inner_->GetStatus(); }
  absl::StatusOr<std::vector<VariableSnapshot>> ReadState(
      absl::Span<const std::string> names) override {
    return inner_->ReadState(names);
  }
  absl::Status RestoreState(const std::vector<VariableSnapshot>& snapshots) override {
    return inner_->RestoreState(snapshots);
  }
  absl::Status Shutdown(const std::string& reason) override { return inner_->Shutdown(reason); }

 private:
  PsClient* const inner_;
  PushBarrier* const barrier_;
};

// The README's "one RPC per ps, all in flight at once": each step's push to one ps waits
// at a barrier for the push to the other, so a trainer that pushed to the ps one after
// the other would fail every step (the first push waiting out the barrier alone).
TEST_F(PsTrainerTest, PushesToEveryPsAreInFlightAtOnce) {
  PushBarrier barrier(2);
  BarrierPsClient ps0(clients_[0].get(), &barrier), ps1(clients_[1].get(), &barrier);
  auto trainer = PsTrainer::Create(model_.get(), {&ps0, &ps1}, placement_, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  Tensor x, y;
  MakeBatch(16, 3, &x, &y);
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<StepResult> result = (*trainer)->Step(x, y);
    ASSERT_TRUE(result.ok()) << result.status();
  }
  absl::MutexLock lock(&barrier.mu);
  EXPECT_EQ(barrier.rounds, 3);
}

// Counts what a trainer records (the worker daemon's WorkerMetrics records the same calls).
struct CountingMetrics : PsTrainerMetrics {
  void RecordStep(int64_t step_samples, absl::Duration compute,
                  absl::Duration push_pull) override {
    ++steps;
    samples += step_samples;
    EXPECT_GE(compute, absl::ZeroDuration());
    EXPECT_GE(push_pull, absl::ZeroDuration());
  }
  void RecordPull(absl::Duration pull) override {
    ++pulls;
    EXPECT_GE(pull, absl::ZeroDuration());
  }
  void RecordRetry() override { ++retries; }
  int steps = 0;
  int64_t samples = 0;
  int pulls = 0;
  int retries = 0;
};

// Forwards every call, but PushPull fails (UNAVAILABLE) while `fail` is set.
class FailingPushPsClient : public BarrierPsClient {
 public:
  FailingPushPsClient(PsClient* inner, PushBarrier* barrier) : BarrierPsClient(inner, barrier) {}
  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                               const PushContext& context,
                                               std::vector<int64_t>* versions) override {
    if (fail) return absl::UnavailableError(absl::StrCat(name(), ": down"));
    return BarrierPsClient::PushPull(gradients, context, versions);
  }
  bool fail = false;
};

// The metrics interface gets every phase: one full pull before the first step, each step
// pushed with its samples, a failed exchange as a retry, and the full pull after it.
TEST_F(PsTrainerTest, RecordsStepsPullsAndRetriesWhereItIsTold) {
  PushBarrier alone(1);  // one caller per round: never waits
  FailingPushPsClient ps0(clients_[0].get(), &alone);
  auto trainer = PsTrainer::Create(model_.get(), {&ps0, clients_[1].get()}, placement_, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  CountingMetrics metrics;
  (*trainer)->SetMetrics(&metrics);
  Tensor x, y;
  MakeBatch(16, 3, &x, &y);
  for (int step = 0; step < 3; ++step) ASSERT_TRUE((*trainer)->Step(x, y).ok());
  EXPECT_EQ(metrics.steps, 3);
  EXPECT_EQ(metrics.samples, 48);
  EXPECT_EQ(metrics.pulls, 1);
  EXPECT_EQ(metrics.retries, 0);

  ps0.fail = true;
  EXPECT_EQ((*trainer)->Step(x, y).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(metrics.steps, 3);
  EXPECT_EQ(metrics.retries, 1);
  ps0.fail = false;
  ASSERT_TRUE((*trainer)->Step(x, y).ok());
  EXPECT_EQ(metrics.steps, 4);
  EXPECT_EQ(metrics.pulls, 2);  // everything pulled afresh after the failed exchange
}

// Overlap: every push (after the first) is computed on weights that miss the worker's
// own previous push, which the ps sees as a lag of exactly 1; it still trains, and Flush
// leaves every step applied once. Without overlap a push carrying its versions has lag 0,
// and one without them (the async default) is not counted.
TEST_F(PsTrainerTest, OverlappedPushesLagByOneAndStillTrain) {
  auto trainer = PsTrainer::Create(model_.get(), Clients(), placement_, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  (*trainer)->SetConsistency("worker 0", /*send_versions=*/false);
  (*trainer)->SetOverlap(true);
  EXPECT_TRUE((*trainer)->overlap());
  double first = 0, last = 0;
  ASSERT_NO_FATAL_FAILURE(Train200Steps(trainer->get(), &first, &last));
  EXPECT_EQ((*trainer)->steps_done(), 199);  // the last one is in flight
  ASSERT_TRUE((*trainer)->Flush().ok());
  EXPECT_EQ((*trainer)->steps_done(), 200);
  EXPECT_LT(last, 0.5 * first);
  for (int p = 0; p < 2; ++p) {
    for (const auto& info : stores_[p].List()) EXPECT_EQ(info.version, 200) << info.name;
    EXPECT_EQ(stores_[p].push_lag_pushes(), 200) << "ps " << p;
    EXPECT_EQ(stores_[p].push_lag_sum(), 199) << "ps " << p;  // 0 for the first, 1 after
    EXPECT_EQ(stores_[p].push_lag_max(), 1) << "ps " << p;
  }
}

TEST_F(PsTrainerTest, PushesWithoutOverlapLagByNothing) {
  Tensor x, y;
  MakeBatch(16, 3, &x, &y);
  auto silent = PsTrainer::Create(model_.get(), Clients(), placement_, 1);
  ASSERT_TRUE(silent.ok()) << silent.status();
  for (int step = 0; step < 5; ++step) ASSERT_TRUE((*silent)->Step(x, y).ok());
  EXPECT_EQ(stores_[0].push_lag_pushes(), 0);  // async sends no versions by default
  auto trainer = PsTrainer::Create(model_.get(), Clients(), placement_, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  (*trainer)->SetConsistency("worker 0", /*send_versions=*/true);
  EXPECT_FALSE((*trainer)->overlap());
  for (int step = 0; step < 20; ++step) ASSERT_TRUE((*trainer)->Step(x, y).ok());
  EXPECT_EQ((*trainer)->steps_done(), 20);  // each step applied before Step returned
  ASSERT_TRUE((*trainer)->Flush().ok());
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(stores_[p].push_lag_pushes(), 20) << "ps " << p;
    EXPECT_EQ(stores_[p].push_lag_max(), 0) << "ps " << p;
  }
}

// Forwards every call, but a PushPull waits for `release` (when set) before going on.
class GatedPsClient : public BarrierPsClient {
 public:
  GatedPsClient(PsClient* inner, PushBarrier* barrier) : BarrierPsClient(inner, barrier) {}
  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                               const PushContext& context,
                                               std::vector<int64_t>* versions) override {
    if (release != nullptr) release->WaitForNotification();
    return BarrierPsClient::PushPull(gradients, context, versions);
  }
  absl::Notification* release = nullptr;
};

// The next step computes while the previous step's exchange is held at the ps: the
// overlapped Step returns with its push still in flight.
TEST_F(PsTrainerTest, OverlappedStepComputesWhileThePushIsInFlight) {
  PushBarrier alone(1);
  GatedPsClient ps0(clients_[0].get(), &alone);
  auto trainer = PsTrainer::Create(model_.get(), {&ps0, clients_[1].get()}, placement_, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  (*trainer)->SetOverlap(true);
  Tensor x, y;
  MakeBatch(16, 3, &x, &y);
  absl::Notification release;
  ps0.release = &release;
  ASSERT_TRUE((*trainer)->Step(x, y).ok());  // returns with ps 0's push held
  ASSERT_TRUE((*trainer)->ComputeGradients(x, y).ok());
  EXPECT_EQ((*trainer)->steps_done(), 0);
  EXPECT_EQ(stores_[0].num_pushes(), 0);
  release.Notify();
  ASSERT_TRUE((*trainer)->PushGradients().ok());  // waits for the first, starts the second
  EXPECT_EQ((*trainer)->steps_done(), 1);
  ASSERT_TRUE((*trainer)->Flush().ok());
  EXPECT_EQ((*trainer)->steps_done(), 2);
  EXPECT_EQ(stores_[0].num_pushes(), 2);
  EXPECT_EQ(stores_[1].num_pushes(), 2);
}

// An overlapped exchange's error surfaces at the next PushGradients (that step is not
// pushed) or at Flush, counts as a retry, and the next step pulls everything afresh.
TEST_F(PsTrainerTest, OverlappedExchangeErrorSurfacesAtTheNextPushOrFlush) {
  PushBarrier alone(1);
  FailingPushPsClient ps0(clients_[0].get(), &alone);
  auto trainer = PsTrainer::Create(model_.get(), {&ps0, clients_[1].get()}, placement_, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  CountingMetrics metrics;
  (*trainer)->SetMetrics(&metrics);
  (*trainer)->SetOverlap(true);
  Tensor x, y;
  MakeBatch(16, 3, &x, &y);
  for (int step = 0; step < 3; ++step) ASSERT_TRUE((*trainer)->Step(x, y).ok());
  ASSERT_TRUE((*trainer)->Flush().ok());
  EXPECT_EQ(metrics.steps, 3);
  EXPECT_EQ(metrics.pulls, 1);

  ps0.fail = true;  // nothing in flight: the exchange threads read it only from here on
  ASSERT_TRUE((*trainer)->Step(x, y).ok());  // its exchange fails in flight
  absl::StatusOr<StepResult> next = (*trainer)->Step(x, y);
  EXPECT_EQ(next.status().code(), absl::StatusCode::kUnavailable) << next.status();
  EXPECT_EQ(metrics.retries, 1);
  EXPECT_EQ(metrics.steps, 3);
  ps0.fail = false;
  ASSERT_TRUE((*trainer)->Step(x, y).ok());
  EXPECT_EQ(metrics.pulls, 2);  // everything pulled afresh after the failed exchange
  ASSERT_TRUE((*trainer)->Flush().ok());
  EXPECT_EQ(metrics.steps, 4);
  EXPECT_EQ(stores_[1].num_pushes(), 5);  // ps 1 applied the failed round's push too

  EXPECT_EQ(stores_[0].num_pushes(), 4);

  ps0.fail = true;
  ASSERT_TRUE((*trainer)->Step(x, y).ok());
  absl::Status flushed = (*trainer)->Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kUnavailable) << flushed;
  EXPECT_EQ(metrics.retries, 2);
  EXPECT_EQ(metrics.steps, 4);
  EXPECT_TRUE((*trainer)->Flush().ok());  // reported once
}

TEST_F(PsTrainerTest, PlacementThatDoesNotFitTheModelIsRejected) {
  std::vector<VariablePlacementEntry> missing(placement_.begin(), placement_.end() - 1);
  EXPECT_EQ(PsTrainer::Create(model_.get(), Clients(), missing, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<VariablePlacementEntry> out_of_range = placement_;
  out_of_range[0].set_ps_index(5);
  EXPECT_EQ(PsTrainer::Create(model_.get(), Clients(), out_of_range, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<VariablePlacementEntry> wrong_shape = placement_;
  wrong_shape[0].set_shape(0, 99);
  EXPECT_EQ(PsTrainer::Create(model_.get(), Clients(), wrong_shape, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PsTrainerTest, BatchOfTheWrongWidthFailsWithoutTouchingThePs) {
  auto trainer = PsTrainer::Create(model_.get(), Clients(), placement_, 1);
  ASSERT_TRUE(trainer.ok());
  Tensor x({8, 5}), y({8});
  EXPECT_EQ((*trainer)->Step(x, y).status().code(), absl::StatusCode::kInvalidArgument);
  for (int p = 0; p < 2; ++p) EXPECT_EQ(stores_[p].num_pushes(), 0);
}

// Every variable split in two, the halves on different ps: training with SGD must give the
// same weights as with every variable whole, since slicing and reassembling only move rows.
TEST_F(PsTrainerTest, PartitionedVariablesTrainLikeWholeOnes) {
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(0.1f);
  auto partitioned = RoundRobinShardsForTest(shapes_, 2, 2);
  ASSERT_EQ(partitioned.size(), 2 * shapes_.size());

  VariableStore whole_stores[2], split_stores[2];
  auto whole_clients = CreateOnStores(*model_, placement_, 11, sgd, whole_stores);
  auto split_clients = CreateOnStores(*model_, partitioned, 11, sgd, split_stores);
  // Both halves of every variable: one on each ps.
  for (int p = 0; p < 2; ++p) EXPECT_EQ(split_stores[p].List().size(), shapes_.size());

  auto whole = PsTrainer::Create(model_.get(), {whole_clients[0].get(), whole_clients[1].get()},
                                 placement_, 5);
  auto parts = PsTrainer::Create(model_.get(), {split_clients[0].get(), split_clients[1].get()},
                                 partitioned, 5);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(parts.ok()) << parts.status();
  for (int step = 0; step < 40; ++step) {
    Tensor x, y;
    MakeBatch(32, 100 + step, &x, &y);
    auto a = (*whole)->Step(x, y);
    auto b = (*parts)->Step(x, y);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_NEAR(a->loss_sum, b->loss_sum, 1e-4);
  }
  // A fresh pull reassembles from the stores, not from the trainer's own copy.
  ASSERT_TRUE((*whole)->PullAll().ok());
  ASSERT_TRUE((*parts)->PullAll().ok());
  const std::vector<Tensor>& wa = (*whole)->weights();
  const std::vector<Tensor>& wb = (*parts)->weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    ASSERT_EQ(wa[i].shape(), wb[i].shape()) << shapes_[i].name;
    for (int64_t j = 0; j < wa[i].num_elements(); ++j) {
      EXPECT_NEAR(wa[i].data()[j], wb[i].data()[j], 1e-6) << shapes_[i].name << "[" << j << "]";
    }
  }
  // And training moved the weights away from their initial values.
  std::vector<Tensor> initial = model_->InitialValues(11);
  EXPECT_NE(std::vector<float>(wa[0].values().begin(), wa[0].values().end()),
            std::vector<float>(initial[0].values().begin(), initial[0].values().end()));
}

// Issue 4's exact accounting: kThreads threads each push a known gradient kPushes times
// with SGD(lr=1) into a variable split over two ps (shards of 4 and 3 rows) through the
// real stores, and the final value must match the exact total.
class PartitionedAccountingTest : public ::testing::Test {
 protected:
  static constexpr int kThreads = 3;

  // Creates the split variable on both stores; `consistency` as the ps would receive it.
  void CreateVariable(const ConsistencyConfig& consistency) {
    placement_ = RoundRobinShardsForTest({{"emb", shape_}}, 2, 2);
    ASSERT_EQ(placement_.size(), 2u);
    ASSERT_NE(placement_[0].ps_index(), placement_[1].ps_index());
    OptimizerConfig sgd;
    sgd.set_name("sgd");
    sgd.set_learning_rate(1.0f);
    initial_ = Tensor(shape_);
    for (int64_t i = 0; i < initial_.num_elements(); ++i) initial_.data()[i] = static_cast<float>(i);
    for (const VariablePlacementEntry& shard : placement_) {
      ASSERT_TRUE(stores_[shard.ps_index()]
                      .CreateVariables({{shard.name(), *SliceShard(initial_, shard)}}, sgd,
                                       consistency)
                      .ok());
    }
    clients_[0] = CreateLocalPsClient(0, &stores_[0]);
    clients_[1] = CreateLocalPsClient(1, &stores_[1]);
  }

  // Thread t pushes g_t[i] = t + 1 + i % 3: small integers, so every sum and mean is exact.
  Tensor Gradient(int t) const {
    Tensor g(shape_);
    for (int64_t i = 0; i < g.num_elements(); ++i) g.data()[i] = static_cast<float>(t + 1 + i % 3);
    return g;
  }

  // The variable reassembled from both stores; checks every shard's version.
  Tensor FinalValue(int64_t expected_version) {
    Tensor value(shape_);
    for (const VariablePlacementEntry& shard : placement_) {
      std::vector<int64_t> versions;
      auto pulled = stores_[shard.ps_index()].Pull({shard.name()}, &versions);
      EXPECT_TRUE(pulled.ok());
      if (!pulled.ok()) continue;
      EXPECT_EQ(versions[0], expected_version) << shard.name();
      EXPECT_TRUE(CopyShardInto((*pulled)[0], shard, &value).ok());
    }
    return value;
  }

  const std::vector<int64_t> shape_ = {7, 4};
  std::vector<VariablePlacementEntry> placement_;
  Tensor initial_;
  VariableStore stores_[2];
  std::unique_ptr<PsClient> clients_[2];
};

// Async: concurrent pushes to the same shard never lose an update, so the final value is
// exactly initial - the sum of every push.
TEST_F(PartitionedAccountingTest, ConcurrentPushesAreNeverLost) {
  constexpr int kPushes = 50;
  CreateVariable(ConsistencyConfig());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Tensor g = Gradient(t);
      for (int m = 0; m < kPushes; ++m) {
        for (const VariablePlacementEntry& shard : placement_) {
          auto rows = SliceShard(g, shard);
          if (!rows.ok() ||
              !clients_[shard.ps_index()]->PushPull({{shard.name(), *std::move(rows)}}, m).ok()) {
            ++failures;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  const Tensor final_value = FinalValue(kThreads * kPushes);
  for (int64_t i = 0; i < final_value.num_elements(); ++i) {
    float expected = initial_.data()[i];
    for (int t = 0; t < kThreads; ++t) expected -= kPushes * Gradient(t).data()[i];
    EXPECT_EQ(final_value.data()[i], expected) << "element " << i;
  }
}

// Sync with replicas_to_aggregate = kThreads, each push carrying the version it last got
// back: every round's gradients form one aggregate, so the final value is exactly
// initial - kPushes * mean(gradients), and the version is kPushes.
TEST_F(PartitionedAccountingTest, SyncAppliesEveryRoundsMeanExactlyOnce) {
  constexpr int kPushes = 20;
  ConsistencyConfig sync;
  sync.set_mode(CONSISTENCY_SYNC);
  sync.set_replicas_to_aggregate(kThreads);
  sync.set_timeout_ms(60000);  // long: a timed-out partial aggregate would break the sum
  CreateVariable(sync);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Tensor g = Gradient(t);
      std::vector<int64_t> version(placement_.size(), 0);
      for (int m = 0; m < kPushes; ++m) {
        for (size_t s = 0; s < placement_.size(); ++s) {
          const VariablePlacementEntry& shard = placement_[s];
          auto rows = SliceShard(g, shard);
          PushContext context;
          context.worker = "worker " + std::to_string(t);
          context.step = m;
          context.versions = {version[s]};
          std::vector<int64_t> pulled;
          if (!rows.ok() || !clients_[shard.ps_index()]
                                 ->PushPull({{shard.name(), *std::move(rows)}}, context, &pulled)
                                 .ok() ||
              pulled.size() != 1) {
            ++failures;
            continue;
          }
          version[s] = pulled[0];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  const Tensor final_value = FinalValue(kPushes);
  for (int p = 0; p < 2; ++p) EXPECT_EQ(stores_[p].stale_gradients(), 0);
  for (int64_t i = 0; i < final_value.num_elements(); ++i) {
    float mean = 0;
    for (int t = 0; t < kThreads; ++t) mean += Gradient(t).data()[i];
    mean /= kThreads;
    EXPECT_EQ(final_value.data()[i], initial_.data()[i] - kPushes * mean) << "element " << i;
  }
}

}  // namespace
}  // namespace pstrain
