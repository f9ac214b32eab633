// PsRecovery against real VariableStores through in-process clients, one of which can go
// down and come back empty as a restarted ps task does, and real checkpoint files.

#include "ps_server/client/ps_recovery.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/math/cpu_backend.h"
#include "common/status_macros.h"
#include "common/model/job_spec.h"
#include "gtest/gtest.h"
#include "ps_server/client/checkpointer.h"
#include "ps_server/local_ps_client.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

constexpr char kJob[] = R"({"model": {"class_name": "Sequential", "config": {"layers": [
  {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4]}},
  {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}},
  "compile": {"optimizer": "adam", "loss": "mse"}})";

constexpr uint64_t kSeed = 3;

std::string TempRoot(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

std::vector<float> Values(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

// A ps task that can be stopped (every call UNAVAILABLE, as an unreachable task answers)
// and restarted with an empty store, as a restarted ps_server comes back.
class RestartablePs : public PsClient {
 public:
  explicit RestartablePs(int index) : index_(index) { Start(); }

  void Stop() {
    absl::MutexLock lock(&mu_);
    up_ = false;
  }
  void Start() {
    absl::MutexLock lock(&mu_);
    store_ = std::make_unique<VariableStore>();
    client_ = CreateLocalPsClient(index_, store_.get());
    up_ = true;
  }

  std::string name() const override { return absl::StrCat("ps task ", index_, " (local)"); }
  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency) override {
    PS_ASSIGN_OR_RETURN(PsClient * c, Up());
    values_sent += static_cast<int64_t>(variables.size());
    return c->CreateVariables(std::move(variables), optimizer, consistency);
  }
  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               std::vector<InitialShard> drawn, const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency) override {
    PS_ASSIGN_OR_RETURN(PsClient * c, Up());
    values_sent += static_cast<int64_t>(variables.size());
    shards_drawn += static_cast<int64_t>(drawn.size());
    return c->CreateVariables(std::move(variables), std::move(drawn), optimizer, consistency);
  }

  // Variables created from values sent, and from initializers the ps drew, so far.
  std::atomic<int64_t> values_sent{0};
  std::atomic<int64_t> shards_drawn{0};
  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names,
                                           std::vector<int64_t>* versions) override {
    PS_ASSIGN_OR_RETURN(PsClient * c, Up());
    return c->Pull(names, versions);
  }
  absl::Status Push(absl::Span<const NamedTensor> gradients, int64_t step) override {
    PS_ASSIGN_OR_RETURN(PsClient * c, Up());
    return c->Push(gradients, step);
  }
  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                               const PushContext& context,
                                               std::vector<int64_t>* versions) override {
    PS_ASSIGN_OR_RETURN(PsClient * c, Up());
    return c->PushPull(gradients, context, versions);
  }
  absl::StatusOr<PsStatusResponse> GetStatus() override {
    PS_ASSIGN_OR_RETURN(PsClient * c, Up());
    return c->GetStatus();
  }
  absl::StatusOr<std::vector<VariableSnapshot>> ReadState(
      absl::Span<const std::string> names) override {
    PS_ASSIGN_OR_RETURN(PsClient * c, Up());
    return c->ReadState(names);
  }
  absl::Status RestoreState(const std::vector<VariableSnapshot>& snapshots) override {
    PS_ASSIGN_OR_RETURN(PsClient * c, Up());
    return c->RestoreState(snapshots);
  }
  absl::Status Shutdown(const std::string& reason) override { return absl::OkStatus(); }

 private:
  absl::StatusOr<PsClient*> Up() {
    absl::MutexLock lock(&mu_);
    if (!up_) return absl::UnavailableError(absl::StrCat(name(), ": connection refused"));
    return client_.get();
  }

  const int index_;
  absl::Mutex mu_;
  bool up_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<VariableStore> store_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PsClient> client_ ABSL_GUARDED_BY(mu_);
};

class CountingObserver : public TrainingObserver {
 public:
  void OnPsRecovered() override { ++recovered; }
  std::atomic<int> recovered{0};
};

// A job's variables split over two restartable ps tasks, with checkpoints in a folder.
class PsRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = *ParseJobSpec(kJob, "");
    backend_ = CreateCpuBackend();
    model_ = *Model::FromKerasJson(job_.model, backend_.get());
    for (int p = 0; p < 2; ++p) ps_.push_back(std::make_unique<RestartablePs>(p));
    variables_ = std::make_unique<ShardedVariables>(
        model_.get(), std::vector<PsClient*>{ps_[0].get(), ps_[1].get()}, job_.optimizer,
        ConsistencyConfig());
    PlacementPolicy split;
    split.num_shards = 2;
    ASSERT_TRUE(variables_->Create(split, kSeed).ok());
  }

  // One push of 1s to every shard: the values move away from the initial ones.
  void Train() {
    for (const VariablePlacementEntry& e : variables_->placement()) {
      Tensor g(std::vector<int64_t>(e.shape().begin(), e.shape().end()));
      for (float& v : g.values()) v = 1.0f;
      ASSERT_TRUE(ps_[e.ps_index()]->Push({NamedTensor{e.name(), std::move(g)}}, 1).ok());
    }
  }

  std::vector<std::vector<float>> Pulled() {
    auto pulled = variables_->Pull();
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    std::vector<std::vector<float>> out;
    if (pulled.ok()) {
      for (const Tensor& t : *pulled) out.push_back(Values(t));
    }
    return out;
  }

  PsRecovery::Options FastOptions() {
    PsRecovery::Options options;
    options.timeout = absl::Seconds(10);
    options.poll_interval = absl::Milliseconds(20);
    options.seed = kSeed;
    options.observer = &observer_;
    return options;
  }

  JobSpec job_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<std::unique_ptr<RestartablePs>> ps_;
  std::unique_ptr<ShardedVariables> variables_;
  CountingObserver observer_;
};

TEST_F(PsRecoveryTest, PsGoneIsAFailedOrEmptiedPsNotABadRequest) {
  EXPECT_TRUE(PsRecovery::IsPsGone(absl::UnavailableError("x")));
  EXPECT_TRUE(PsRecovery::IsPsGone(absl::DeadlineExceededError("x")));
  EXPECT_TRUE(PsRecovery::IsPsGone(absl::AbortedError("x")));
  EXPECT_TRUE(PsRecovery::IsPsGone(absl::CancelledError("x")));
  EXPECT_TRUE(PsRecovery::IsPsGone(absl::NotFoundError("x")));
  EXPECT_TRUE(PsRecovery::IsPsGone(absl::FailedPreconditionError("x")));
  EXPECT_FALSE(PsRecovery::IsPsGone(absl::InvalidArgumentError("x")));
  EXPECT_FALSE(PsRecovery::IsPsGone(absl::InternalError("x")));
  EXPECT_FALSE(PsRecovery::IsPsGone(absl::OkStatus()));
}

TEST_F(PsRecoveryTest, EveryPsHoldingItsShardsChangesNothing) {
  Train();
  const auto before = Pulled();
  PsRecovery recovery(FastOptions(), variables_.get(), nullptr, nullptr);
  ASSERT_TRUE(recovery.Recover("").ok());
  EXPECT_EQ(Pulled(), before);
  EXPECT_EQ(observer_.recovered.load(), 1);
}

TEST_F(PsRecoveryTest, AnEmptiedPsStartsFromTheInitialValuesWithoutACheckpoint) {
  Train();
  const auto trained = Pulled();
  ps_[1]->Stop();
  ps_[1]->Start();  // empty
  PsRecovery recovery(FastOptions(), variables_.get(), nullptr, nullptr);
  const absl::Status recovered = recovery.Recover("training continues");
  ASSERT_TRUE(recovered.ok()) << recovered;
  // Every variable is split over both ps: ps 0's rows keep their trained values; ps 1
  // drew its rows again, exactly the initial values (the ones the one-process trainer
  // draws), with nobody sending them.
  const std::vector<Tensor> initial = model_->InitialValues(kSeed);
  const auto now = Pulled();
  ASSERT_EQ(now.size(), initial.size());
  for (const VariablePlacementEntry& e : variables_->placement()) {
    const size_t i = e.variable_name() == "out/kernel" ? 0 : 1;
    const int64_t row = static_cast<int64_t>(now[i].size()) / initial[i].shape()[0];
    const auto begin = e.row_offset() * row, end = (e.row_offset() + e.num_rows()) * row;
    const std::vector<float> rows(now[i].begin() + begin, now[i].begin() + end);
    if (e.ps_index() == 0) {
      EXPECT_EQ(rows, std::vector<float>(trained[i].begin() + begin, trained[i].begin() + end))
          << e.name();
    } else {
      const std::vector<float> drawn = Values(initial[i]);
      EXPECT_EQ(rows, std::vector<float>(drawn.begin() + begin, drawn.begin() + end))
          << e.name();
      EXPECT_NE(rows, std::vector<float>(trained[i].begin() + begin, trained[i].begin() + end))
          << e.name();
    }
  }
  // Every shard was created from an initializer, at the start and again on ps 1: no
  // values were sent.
  EXPECT_EQ(ps_[0]->values_sent.load() + ps_[1]->values_sent.load(), 0);
  EXPECT_EQ(ps_[0]->shards_drawn.load(), 2);  // out/kernel/part_0, out/bias/part_0
  EXPECT_EQ(ps_[1]->shards_drawn.load(), 4);  // its two parts, twice
}

TEST_F(PsRecoveryTest, AnEmptiedPsIsRestoredFromTheNewestCheckpoint) {
  Checkpointer::Options checkpoints;
  checkpoints.dir = TempRoot("newest");
  Checkpointer checkpointer(checkpoints, &job_, variables_.get());
  Train();
  ASSERT_TRUE(checkpointer.Write(1, 1, nullptr).ok());
  const auto saved = Pulled();
  Train();
  const auto trained = Pulled();
  ASSERT_NE(trained, saved);

  ps_[0]->Stop();
  // The ps comes back while the census waits for it.
  std::thread restart([&] {
    absl::SleepFor(absl::Milliseconds(200));
    ps_[0]->Start();
  });
  PsRecovery recovery(FastOptions(), variables_.get(), &checkpointer, nullptr);
  const absl::Status recovered = recovery.Recover("");
  restart.join();
  ASSERT_TRUE(recovered.ok()) << recovered;
  EXPECT_EQ(observer_.recovered.load(), 1);
  const auto now = Pulled();
  ASSERT_EQ(now.size(), saved.size());
  for (size_t i = 0; i < now.size(); ++i) {
    EXPECT_EQ(now[i].front(), saved[i].front()) << i;    // ps 0: the checkpoint's
    EXPECT_EQ(now[i].back(), trained[i].back()) << i;    // ps 1: as trained
  }
}

TEST_F(PsRecoveryTest, APsThatStaysDownFailsTheJobNamingIt) {
  ps_[1]->Stop();
  PsRecovery::Options options = FastOptions();
  options.timeout = absl::Milliseconds(200);
  PsRecovery recovery(options, variables_.get(), nullptr, nullptr);
  const absl::Status recovered = recovery.Recover("");
  EXPECT_EQ(recovered.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(recovered.message(), "did not come back within 200ms"))
      << recovered;
  EXPECT_TRUE(absl::StrContains(recovered.message(), "ps task 1 (local)")) << recovered;
  EXPECT_EQ(observer_.recovered.load(), 0);
}

TEST_F(PsRecoveryTest, TheWaitGivesUpWithItsOwnStatus) {
  ps_[1]->Stop();
  PsRecovery::Options options = FastOptions();
  int waits = 0;
  options.wait = [&](absl::Duration) {
    return ++waits < 3 ? absl::OkStatus() : absl::CancelledError("shutting down");
  };
  PsRecovery recovery(options, variables_.get(), nullptr, nullptr);
  const absl::Status recovered = recovery.Recover("");
  EXPECT_EQ(recovered.code(), absl::StatusCode::kCancelled) << recovered;
  EXPECT_EQ(waits, 3);
}

TEST_F(PsRecoveryTest, RetriesAStepOnceAfterRecoveringOnlyWhenAPsIsGone) {
  PsRecovery recovery(FastOptions(), variables_.get(), nullptr, nullptr);
  int runs = 0;
  const absl::Status retried = recovery.RetryAfterRecovery(
      [&] { return ++runs == 1 ? absl::UnavailableError("ps gone") : absl::OkStatus(); }, "");
  EXPECT_TRUE(retried.ok()) << retried;
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(observer_.recovered.load(), 1);

  runs = 0;
  const absl::Status bad = recovery.RetryAfterRecovery(
      [&] {
        ++runs;
        return absl::InvalidArgumentError("bad request");
      },
      "");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace pstrain
