#include "distribute/watched_worker.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain::distribute {
namespace {

// A worker in this process that can be made unreachable (Ready fails, as a killed
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

class FnClosure : public Closure {
 public:
  explicit FnClosure(std::function<absl::Status(int)> body) : body_(std::move(body)) {}
  std::string Describe() const override { return "closure " + std::to_string(id()); }
  absl::Status Run(int worker) override { return body_(worker); }
  void Finish(absl::Status) override {}

 private:
  const std::function<absl::Status(int)> body_;
};

// Waits (bounded) until `done` holds; the test's assertion follows.
void WaitUntil(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!done() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
}

// A custom loop's membership, fed by the scheduler alone: its Ready polls register both
// workers; worker 1, killed in its first closure, is lost (its closure runs on worker 0),
// and is back once its polls answer again, after which it runs closures again.
TEST(WatchedWorkerTest, TheSchedulersPollsAndLossesFeedMembership) {
  const ClusterSpec cluster =
      *ClusterSpec::Create({{"chief", {"h:1"}}, {"ps", {"h:2"}}, {"worker", {"h:3", "h:4"}}});
  Membership::Options mo;
  mo.jobs = {Role::kWorker};
  Membership membership(cluster, mo);
  FakeWorker w0(0), w1(1);
  w0.ready = false;  // worker 1 takes the first closure
  WatchedWorker watched0(&w0, &membership, 0), watched1(&w1, &membership, 1);
  std::atomic<int> told_lost{0};
  ClosureSchedulerOptions so;
  so.poll_interval = absl::Milliseconds(5);
  so.on_worker_lost = ReportLostTo(&membership, [&](int w, const absl::Status&) {
    EXPECT_EQ(w, 1);
    ++told_lost;
  });
  ClosureScheduler scheduler({&watched0, &watched1}, so);
  EXPECT_EQ(watched1.name(), "worker 1");

  std::atomic<bool> killed{false};
  scheduler.Schedule(std::make_shared<FnClosure>([&](int w) -> absl::Status {
    if (w == 1 && !killed.exchange(true)) {
      w1.reachable = false;
      w0.ready = true;
      return absl::UnavailableError("worker 1: connection reset");
    }
    return absl::OkStatus();
  }));
  ASSERT_TRUE(scheduler.Join().ok());
  EXPECT_EQ(told_lost.load(), 1);
  EXPECT_EQ(*membership.State({Role::kWorker, 0}), MemberState::kAlive);
  EXPECT_EQ(*membership.State({Role::kWorker, 1}), MemberState::kLost);

  w1.reachable = true;  // restarted
  WaitUntil([&] { return *membership.State({Role::kWorker, 1}) == MemberState::kAlive; });
  ASSERT_EQ(*membership.State({Role::kWorker, 1}), MemberState::kAlive);
  EXPECT_EQ(membership.Snapshot()[1].times_back, 1);

  // Back means scheduled again: worker 1 takes some of the next closures.
  std::atomic<int> ran_on_1{0};
  for (int i = 0; i < 40; ++i) {
    scheduler.Schedule(std::make_shared<FnClosure>([&](int w) {
      if (w == 1) ++ran_on_1;
      absl::SleepFor(absl::Milliseconds(2));
      return absl::OkStatus();
    }));
  }
  ASSERT_TRUE(scheduler.Join().ok());
  EXPECT_GT(ran_on_1.load(), 0);
}

}  // namespace
}  // namespace pstrain::distribute
