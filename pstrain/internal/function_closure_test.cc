#include "pstrain/internal/function_closure.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "distribute/closure_scheduler.h"
#include "gtest/gtest.h"
#include "pstrain/internal/function_runner.h"
#include "pstrain/internal/function_worker_client.h"
#include "distribute/distributed_dataset.h"

namespace pstrain::distribute::internal {
namespace {

// A worker as the chief sees it: a FunctionRunner with one function, "which", that
// returns {worker index, first feature of the next batch}, over a 1-feature dataset
// 0, 1, 2, ... of its own.
struct TestWorker {
  explicit TestWorker(int index) : client("worker " + std::to_string(index), &runner) {
    Tensor x({100, 1});
    Tensor y({100});
    for (int i = 0; i < 100; ++i) x.values()[i] = static_cast<float>(i);
    auto data = std::make_shared<const Dataset>(*MakeDataset(std::move(x), std::move(y), 0));
    DistributedDatasetOptions o;
    o.global_batch_size = 1;
    o.shuffle = false;
    o.repeat = -1;
    o.prefetch = 0;
    auto it = (*DistributedDataset::Create(data, o, 1, 0, 1))->MakeIterator(0);
    runner.AddIterator(*std::move(it));
    runner.RegisterFunction("which", [index, this](DistributedIterator& it)
                                         -> absl::StatusOr<std::vector<double>> {
      ++calls;
      if (fail_with.load() != absl::StatusCode::kOk) {
        return absl::Status(fail_with.load(), "the function's own error");
      }
      absl::StatusOr<DistributedBatch> b = it.Next();
      if (!b.ok()) return b.status();
      return std::vector<double>{static_cast<double>(index), b->replicas[0].x.values()[0]};
    });
    runner.SetReady(true);
  }
  FunctionRunner runner;
  LocalFunctionWorkerClient client;
  std::atomic<int> calls{0};
  std::atomic<absl::StatusCode> fail_with{absl::StatusCode::kOk};
};

// Runs the function, then loses its answer, and is gone from then on (a worker killed
// before it replied).
class DiesAfterRunning : public FunctionWorkerClient {
 public:
  explicit DiesAfterRunning(FunctionWorkerClient* inner) : inner_(inner) {}
  std::string name() const override { return inner_->name(); }
  absl::StatusOr<RunFunctionResponse> Run(const RunFunctionRequest& request) override {
    if (!dead_) {
      (void)inner_->Run(request);
      dead_ = true;
    }
    return absl::UnavailableError(name() + ": connection reset");
  }
  absl::StatusOr<bool> Ready() override {
    if (dead_) return absl::UnavailableError(name() + ": connection refused");
    return inner_->Ready();
  }
  absl::Status Shutdown(const std::string& reason) override { return inner_->Shutdown(reason); }
  bool dead() const { return dead_; }

 private:
  FunctionWorkerClient* const inner_;
  std::atomic<bool> dead_{false};
};

RunFunctionRequest Which() {
  RunFunctionRequest r;
  r.set_function_index(0);
  r.set_function("which");
  r.set_iterator_index(0);
  return r;
}

// Schedules `request` on `scheduler` as a custom loop's chief does.
// A scheduler over `workers` and what the chief schedules on it, as ClusterCoordinator
// does.
struct Chief {
  Chief(std::vector<FunctionWorkerClient*> w, ClosureSchedulerOptions o)
      : workers(std::move(w)), scheduler(std::vector<ScheduledWorker*>(workers.begin(),
                                                                       workers.end()),
                                         o) {}
  std::shared_ptr<FunctionClosure> Schedule(RunFunctionRequest request) {
    auto closure = std::make_shared<FunctionClosure>(std::move(request), workers);
    scheduler.Schedule(closure);
    return closure;
  }
  absl::Status Join() { return scheduler.Join(); }
  std::vector<int64_t> functions_run() const { return scheduler.closures_run(); }
  const std::vector<FunctionWorkerClient*> workers;
  ClosureScheduler scheduler;
};

ClosureSchedulerOptions Fast() {
  ClosureSchedulerOptions o;
  o.startup_timeout = absl::Seconds(10);
  o.recovery_timeout = absl::Seconds(10);
  o.poll_interval = absl::Milliseconds(10);
  return o;
}

TEST(FunctionClosureTest, RunsEveryFunctionOnTheWorkersAndReturnsTheirValues) {
  TestWorker w0(0), w1(1);
  Chief scheduler({&w0.client, &w1.client}, Fast());
  std::vector<std::shared_ptr<FunctionClosure>> values;
  for (int i = 0; i < 40; ++i) values.push_back(scheduler.Schedule(Which()));
  ASSERT_TRUE(scheduler.Join().ok());
  std::vector<int> next_feature = {0, 0};  // each worker reads its own iterator in order
  for (const auto& v : values) {
    ASSERT_TRUE(v->done());
    absl::StatusOr<std::vector<double>> r = v->Wait();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->size(), 2u);
    const int w = static_cast<int>((*r)[0]);
    EXPECT_EQ((*r)[1], next_feature[w]++);
  }
  const std::vector<int64_t> run = scheduler.functions_run();
  EXPECT_EQ(run[0] + run[1], 40);
  EXPECT_EQ(run[0], next_feature[0]);
  EXPECT_EQ(values.back()->id(), 39);
}

TEST(FunctionClosureTest, AFunctionWhoseWorkerIsLostRunsAgainOnAnother) {
  TestWorker w0(0), w1(1);
  w0.runner.SetReady(false);  // worker 1 takes the first function
  DiesAfterRunning dying(&w1.client);
  Chief scheduler({&w0.client, &dying}, Fast());
  std::vector<std::shared_ptr<FunctionClosure>> values;
  for (int i = 0; i < 20; ++i) values.push_back(scheduler.Schedule(Which()));
  while (!dying.dead()) absl::SleepFor(absl::Milliseconds(1));
  w0.runner.SetReady(true);
  ASSERT_TRUE(scheduler.Join().ok());
  for (const auto& v : values) {
    absl::StatusOr<std::vector<double>> r = v->Wait();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0], 0.0);  // every value is worker 0's
  }
  // The function worker 1 ran and never answered ran again on worker 0 (at least once).
  EXPECT_EQ(w1.calls, 1);
  EXPECT_EQ(w0.calls, 20);
  EXPECT_EQ(scheduler.functions_run(), (std::vector<int64_t>{20, 0}));
}

TEST(FunctionClosureTest, JoinReturnsTheFirstFunctionErrorAndTheQueueIsCancelled) {
  TestWorker w0(0);
  w0.fail_with = absl::StatusCode::kInvalidArgument;
  w0.runner.SetReady(false);  // every function is queued before the first one fails
  Chief scheduler({&w0.client}, Fast());
  std::vector<std::shared_ptr<FunctionClosure>> values;
  for (int i = 0; i < 50; ++i) values.push_back(scheduler.Schedule(Which()));
  w0.runner.SetReady(true);
  absl::Status joined = scheduler.Join();
  EXPECT_TRUE(absl::IsInvalidArgument(joined)) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "\"which\"")) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "the function's own error")) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "worker 0")) << joined;
  EXPECT_TRUE(absl::IsInvalidArgument(values[0]->Wait().status()));
  EXPECT_TRUE(absl::IsCancelled(values.back()->Wait().status())) << values.back()->Wait().status();
  EXPECT_LT(w0.calls, 50);
  // The error was reported once; scheduling goes on.
  w0.fail_with = absl::StatusCode::kOk;
  auto after = scheduler.Schedule(Which());
  EXPECT_TRUE(scheduler.Join().ok());
  EXPECT_TRUE(after->Wait().ok());
}

// A function whose ps is unreachable (its own UNAVAILABLE) is reported ABORTED by the
// worker: the chief neither takes the worker for lost nor fails the loop, but recovers the
// ps once and runs the function again.
TEST(FunctionClosureTest, AFunctionThatFailedOnAPsRunsAgainAfterThePsIsRecovered) {
  TestWorker w0(0);
  w0.fail_with = absl::StatusCode::kUnavailable;
  int recoveries = 0;
  ClosureSchedulerOptions o = Fast();
  o.recover_ps = [&] {
    ++recoveries;
    w0.fail_with = absl::StatusCode::kOk;
    return absl::OkStatus();
  };
  Chief scheduler({&w0.client}, o);
  auto v = scheduler.Schedule(Which());
  ASSERT_TRUE(scheduler.Join().ok());
  absl::StatusOr<std::vector<double>> r = v->Wait();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(recoveries, 1);
  EXPECT_EQ(w0.calls, 2);
  EXPECT_EQ(scheduler.functions_run(), std::vector<int64_t>{1});
}

TEST(FunctionClosureTest, WithoutPsRecoveryAFunctionThatFailedOnAPsFailsJoinAsAborted) {
  TestWorker w0(0);
  w0.fail_with = absl::StatusCode::kNotFound;  // a restarted ps that lost its variables
  Chief scheduler({&w0.client}, Fast());
  auto v = scheduler.Schedule(Which());
  const absl::Status joined = scheduler.Join();
  EXPECT_TRUE(absl::IsAborted(joined)) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "a ps failed: the function's own error"))
      << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "on worker 0")) << joined;
  EXPECT_TRUE(absl::IsAborted(v->Wait().status()));
  EXPECT_EQ(w0.calls, 1);
}

TEST(FunctionClosureTest, WithNoWorkerTheQueueFailsNamingThemAfterTheStartupTimeout) {
  TestWorker w0(0), w1(1);
  w0.client.set_reachable(false);
  w1.runner.SetReady(false);  // up, but never serving
  ClosureSchedulerOptions o = Fast();
  o.startup_timeout = absl::Milliseconds(300);
  Chief scheduler({&w0.client, &w1.client}, o);
  auto v = scheduler.Schedule(Which());
  const absl::Time start = absl::Now();
  absl::Status joined = scheduler.Join();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_TRUE(absl::IsUnavailable(joined)) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "worker 0: unreachable")) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "worker 1: not ready")) << joined;
  EXPECT_TRUE(absl::IsUnavailable(v->Wait().status()));
  EXPECT_EQ(w0.calls + w1.calls, 0);
}

TEST(FunctionClosureTest, AWorkerThatRegisteredOtherFunctionsIsToldWhy) {
  TestWorker w0(0);
  Chief scheduler({&w0.client}, Fast());
  RunFunctionRequest other = Which();
  other.set_function("train");
  auto v = scheduler.Schedule(other);
  absl::Status joined = scheduler.Join();
  EXPECT_TRUE(absl::IsFailedPrecondition(joined)) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "is \"which\" here but the chief scheduled "
                                                  "\"train\"")) << joined;
  RunFunctionRequest no_iterator = Which();
  no_iterator.set_iterator_index(3);
  scheduler.Schedule(no_iterator);
  EXPECT_TRUE(absl::IsFailedPrecondition(scheduler.Join()));
  EXPECT_EQ(w0.calls, 0);
}

TEST(FunctionClosureTest, DestroyingTheSchedulerCancelsWhatIsQueued) {
  TestWorker w0(0);
  w0.runner.SetReady(false);
  std::shared_ptr<FunctionClosure> v;
  {
    Chief scheduler({&w0.client}, Fast());
    v = scheduler.Schedule(Which());
  }
  EXPECT_TRUE(absl::IsCancelled(v->Wait().status())) << v->Wait().status();
}

}  // namespace
}  // namespace pstrain::distribute::internal
