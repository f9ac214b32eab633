#include "distribute/closure_scheduler.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain::distribute {
namespace {

// A worker in this process: ready or not, or unreachable (Ready fails, as a killed
// worker's GetStatus would).
class FakeWorker : public ScheduledWorker {
 public:
  explicit FakeWorker(int index) : name_("worker " + std::to_string(index)) {}
  std::string name() const override { return name_; }
  absl::StatusOr<bool> Ready() override {
    if (!reachable) return absl::UnavailableError(name_ + ": connection refused");
    return ready.load();
  }
  std::atomic<bool> ready{true};
  std::atomic<bool> reachable{true};

 private:
  const std::string name_;
};

// A closure whose work is `body(worker)`; remembers where it ran and how it finished.
class TestClosure : public Closure {
 public:
  explicit TestClosure(std::function<absl::Status(int)> body) : body_(std::move(body)) {}
  std::string Describe() const override { return "test closure " + std::to_string(id()); }
  absl::Status Run(int worker) override {
    {
      absl::MutexLock lock(&mu_);
      ran_on_.push_back(worker);
    }
    return body_(worker);
  }
  void Finish(absl::Status status) override {
    absl::MutexLock lock(&mu_);
    ++finished_;
    status_ = std::move(status);
  }
  std::vector<int> ran_on() const {
    absl::MutexLock lock(&mu_);
    return ran_on_;
  }
  int finished() const {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  absl::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  const std::function<absl::Status(int)> body_;
  mutable absl::Mutex mu_;
  std::vector<int> ran_on_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_) = absl::UnknownError("not finished");
};

ClosureSchedulerOptions Fast() {
  ClosureSchedulerOptions o;
  o.startup_timeout = absl::Seconds(10);
  o.recovery_timeout = absl::Seconds(10);
  o.poll_interval = absl::Milliseconds(5);
  return o;
}

std::vector<std::shared_ptr<TestClosure>> ScheduleMany(ClosureScheduler& scheduler, int n,
                                                       std::function<absl::Status(int)> body) {
  std::vector<std::shared_ptr<TestClosure>> closures;
  for (int i = 0; i < n; ++i) {
    closures.push_back(std::make_shared<TestClosure>(body));
    scheduler.Schedule(closures.back());
  }
  return closures;
}

TEST(ClosureSchedulerTest, RunsEveryClosureOnceAndCountsThemPerWorker) {
  FakeWorker w0(0), w1(1);
  ClosureScheduler scheduler({&w0, &w1}, Fast());
  auto closures = ScheduleMany(scheduler, 40, [](int) {
    absl::SleepFor(absl::Milliseconds(1));
    return absl::OkStatus();
  });
  ASSERT_TRUE(scheduler.Join().ok());
  std::vector<int64_t> per_worker = {0, 0};
  for (size_t i = 0; i < closures.size(); ++i) {
    EXPECT_EQ(closures[i]->id(), static_cast<int64_t>(i));
    EXPECT_EQ(closures[i]->finished(), 1);
    EXPECT_TRUE(closures[i]->status().ok()) << closures[i]->status();
    ASSERT_EQ(closures[i]->ran_on().size(), 1u);
    ++per_worker[closures[i]->ran_on()[0]];
  }
  EXPECT_EQ(scheduler.closures_run(), per_worker);
  EXPECT_EQ(per_worker[0] + per_worker[1], 40);
}

// Worker 1 takes the first closure and is killed while running it: the closure runs again,
// once, on worker 0, which then runs every closure; worker 1 is reported lost once and
// takes nothing more while it is unreachable.
TEST(ClosureSchedulerTest, ALostWorkersClosureRunsExactlyOnceMoreOnTheOtherWorker) {
  FakeWorker w0(0), w1(1);
  w0.ready = false;  // worker 1 takes the first closure
  std::vector<int> lost;
  absl::Mutex lost_mu;
  ClosureSchedulerOptions o = Fast();
  o.on_worker_lost = [&](int w, const absl::Status& status) {
    absl::MutexLock lock(&lost_mu);
    lost.push_back(w);
    EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  };
  ClosureScheduler scheduler({&w0, &w1}, o);
  auto closures = ScheduleMany(scheduler, 10, [&](int w) -> absl::Status {
    if (w == 1) {
      w1.reachable = false;
      w0.ready = true;
      return absl::UnavailableError("worker 1: connection reset");
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(scheduler.Join().ok());
  EXPECT_EQ(closures[0]->ran_on(), (std::vector<int>{1, 0}));
  for (size_t i = 1; i < closures.size(); ++i) {
    EXPECT_EQ(closures[i]->ran_on(), std::vector<int>{0}) << i;
  }
  for (const auto& c : closures) {
    EXPECT_EQ(c->finished(), 1);
    EXPECT_TRUE(c->status().ok()) << c->status();
  }
  EXPECT_EQ(scheduler.closures_run(), (std::vector<int64_t>{10, 0}));
  absl::MutexLock lock(&lost_mu);
  EXPECT_EQ(lost, std::vector<int>{1});
}

// Both workers report a failed ps for the closures they hold: the scheduler waits for
// both to come back, calls recover_ps once with nothing in flight, and runs both closures
// again before the rest.
TEST(ClosureSchedulerTest, AFailedPsIsRecoveredOnceAndItsClosuresRunAgain) {
  FakeWorker w0(0), w1(1);
  std::atomic<bool> ps_down{true};
  std::atomic<int> in_flight{0};
  std::atomic<int> recoveries{0};
  std::atomic<int> in_flight_at_recovery{-1};
  ClosureSchedulerOptions o = Fast();
  o.recover_ps = [&] {
    in_flight_at_recovery = in_flight.load();
    ++recoveries;
    ps_down = false;
    return absl::OkStatus();
  };
  ClosureScheduler scheduler({&w0, &w1}, o);
  auto closures = ScheduleMany(scheduler, 12, [&](int w) -> absl::Status {
    ++in_flight;
    if (ps_down) {
      // Both workers hold a closure when the ps fails.
      const absl::Time give_up = absl::Now() + absl::Seconds(5);
      while (in_flight < 2 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
      absl::SleepFor(absl::Milliseconds(w * 20));  // they report one after the other
      --in_flight;
      return absl::AbortedError("a ps failed: ps task 0 (localhost:1): connection refused");
    }
    --in_flight;
    return absl::OkStatus();
  });
  ASSERT_TRUE(scheduler.Join().ok());
  EXPECT_EQ(recoveries, 1);
  EXPECT_EQ(scheduler.ps_recoveries(), 1);
  EXPECT_EQ(in_flight_at_recovery, 0);
  EXPECT_EQ(closures[0]->ran_on().size(), 2u);
  EXPECT_EQ(closures[1]->ran_on().size(), 2u);
  for (size_t i = 2; i < closures.size(); ++i) EXPECT_EQ(closures[i]->ran_on().size(), 1u) << i;
  for (const auto& c : closures) {
    EXPECT_EQ(c->finished(), 1);
    EXPECT_TRUE(c->status().ok()) << c->status();
  }
  const std::vector<int64_t> run = scheduler.closures_run();
  EXPECT_EQ(run[0] + run[1], 12);
}

TEST(ClosureSchedulerTest, WithoutRecoverPsAFailedPsIsJoinsErrorNamingIt) {
  FakeWorker w0(0);
  w0.ready = false;  // every closure is queued before the first one fails
  ClosureScheduler scheduler({&w0}, Fast());
  auto closures = ScheduleMany(scheduler, 5, [](int) {
    return absl::AbortedError("a ps failed: ps task 1 (localhost:7): connection refused");
  });
  w0.ready = true;
  const absl::Status joined = scheduler.Join();
  EXPECT_TRUE(absl::IsAborted(joined)) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "ps task 1 (localhost:7)")) << joined;
  EXPECT_EQ(closures[0]->ran_on().size(), 1u);
  EXPECT_TRUE(absl::IsAborted(closures[0]->status()));
  EXPECT_TRUE(absl::IsCancelled(closures[4]->status())) << closures[4]->status();
  EXPECT_EQ(scheduler.ps_recoveries(), 0);
}

TEST(ClosureSchedulerTest, AFailedRecoveryIsJoinsErrorAndEndsTheQueue) {
  FakeWorker w0(0), w1(1);
  std::atomic<int> recoveries{0};
  ClosureSchedulerOptions o = Fast();
  o.recover_ps = [&] {
    ++recoveries;
    return absl::UnavailableError("ps task 1 (localhost:7) did not come back within 1s");
  };
  w0.ready = false;  // every closure is queued before the first one fails
  w1.ready = false;
  ClosureScheduler scheduler({&w0, &w1}, o);
  auto closures = ScheduleMany(scheduler, 6, [](int) {
    return absl::AbortedError("a ps failed: ps task 1 (localhost:7): connection refused");
  });
  w0.ready = true;
  w1.ready = true;
  const absl::Status joined = scheduler.Join();
  EXPECT_TRUE(absl::IsUnavailable(joined)) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "did not come back")) << joined;
  EXPECT_EQ(recoveries, 1);
  for (const auto& c : closures) {
    EXPECT_EQ(c->finished(), 1);
    EXPECT_FALSE(c->status().ok());
  }
}

TEST(ClosureSchedulerTest, AFunctionErrorFailsJoinCancelsTheQueueAndSchedulingGoesOn) {
  FakeWorker w0(0);
  w0.ready = false;  // every closure is queued before the first one fails
  std::atomic<bool> fail{true};
  ClosureScheduler scheduler({&w0}, Fast());
  auto closures = ScheduleMany(scheduler, 20, [&](int) {
    return fail ? absl::InvalidArgumentError("test closure: labels out of range")
                : absl::OkStatus();
  });
  w0.ready = true;
  const absl::Status joined = scheduler.Join();
  EXPECT_TRUE(absl::IsInvalidArgument(joined)) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "labels out of range")) << joined;
  EXPECT_TRUE(absl::IsInvalidArgument(closures[0]->status()));
  EXPECT_TRUE(absl::IsCancelled(closures.back()->status())) << closures.back()->status();
  EXPECT_TRUE(closures.back()->ran_on().empty());
  // Not a lost worker: it stays and runs what comes next.
  fail = false;
  auto after = ScheduleMany(scheduler, 1, [](int) { return absl::OkStatus(); });
  EXPECT_TRUE(scheduler.Join().ok());
  EXPECT_TRUE(after[0]->status().ok());
}

// The chief's training queues a chunk's successor from inside the chunk: Join waits for
// the successors too.
TEST(ClosureSchedulerTest, JoinWaitsForClosuresScheduledByClosures) {
  FakeWorker w0(0), w1(1);
  ClosureScheduler scheduler({&w0, &w1}, Fast());
  std::atomic<int> runs{0};
  std::function<absl::Status(int)> chain = [&](int) {
    if (++runs < 30) scheduler.Schedule(std::make_shared<TestClosure>(chain));
    return absl::OkStatus();
  };
  scheduler.Schedule(std::make_shared<TestClosure>(chain));
  ASSERT_TRUE(scheduler.Join().ok());
  EXPECT_EQ(runs, 30);
}

TEST(ClosureSchedulerTest, WithNoUsableWorkerTheQueueFailsNamingThemAfterTheStartupTimeout) {
  FakeWorker w0(0), w1(1);
  w0.reachable = false;
  w1.ready = false;  // up, but never ready
  ClosureSchedulerOptions o = Fast();
  o.startup_timeout = absl::Milliseconds(300);
  ClosureScheduler scheduler({&w0, &w1}, o);
  auto closures = ScheduleMany(scheduler, 1, [](int) { return absl::OkStatus(); });
  const absl::Time start = absl::Now();
  const absl::Status joined = scheduler.Join();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_TRUE(absl::IsUnavailable(joined)) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "worker 0: connection refused")) << joined;
  EXPECT_TRUE(absl::StrContains(joined.message(), "worker 1: not ready")) << joined;
  EXPECT_TRUE(absl::IsUnavailable(closures[0]->status()));
  EXPECT_TRUE(closures[0]->ran_on().empty());
}

TEST(ClosureSchedulerTest, DestroyingTheSchedulerCancelsWhatIsQueued) {
  FakeWorker w0(0);
  w0.ready = false;
  std::vector<std::shared_ptr<TestClosure>> closures;
  {
    ClosureScheduler scheduler({&w0}, Fast());
    closures = ScheduleMany(scheduler, 3, [](int) { return absl::OkStatus(); });
  }
  for (const auto& c : closures) {
    EXPECT_TRUE(absl::IsCancelled(c->status())) << c->status();
    EXPECT_EQ(c->finished(), 1);
  }
}

}  // namespace
}  // namespace pstrain::distribute
