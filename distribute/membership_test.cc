#include "distribute/membership.h"

#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain::distribute {
namespace {

ClusterSpec TwoPsTwoWorkers() {
  return *ClusterSpec::Create({{"chief", {"h:1"}},
                               {"ps", {"h:2", "h:3"}},
                               {"worker", {"h:4", "h:5"}}});
}

// A clock the test moves by hand, so the deadline rule is tested without sleeping.
class StepClock {
 public:
  std::function<absl::Time()> Fn() {
    return [this] {
      absl::MutexLock lock(&mu_);
      return now_;
    };
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1000);
};

// Records on_change's calls.
struct Changes {
  absl::Mutex mu;
  std::vector<std::tuple<std::string, MemberState, MemberState>> seen ABSL_GUARDED_BY(mu);
  std::function<void(const std::string&, MemberState, MemberState)> Fn() {
    return [this](const std::string& task, MemberState from, MemberState to) {
      absl::MutexLock lock(&mu);
      seen.emplace_back(task, from, to);
    };
  }
  std::vector<std::tuple<std::string, MemberState, MemberState>> Get() {
    absl::MutexLock lock(&mu);
    return seen;
  }
};

TEST(MembershipTest, WaitForAllNamesTheTasksThatNeverCame) {
  Membership membership(TwoPsTwoWorkers());
  ASSERT_TRUE(membership.Register({Role::kPs, 0}, "h:2", 7).ok());
  ASSERT_TRUE(membership.Register({Role::kWorker, 0}, "h:4", 8).ok());
  absl::Status status = membership.WaitForAll(absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("ps 1 (h:3)"), std::string::npos) << status;
  EXPECT_NE(status.message().find("worker 1 (h:5)"), std::string::npos) << status;
  EXPECT_EQ(status.message().find("ps 0"), std::string::npos) << status;
}

TEST(MembershipTest, WaitForAllReturnsWhenTheLastTaskRegistersOrIsHeard) {
  Membership membership(TwoPsTwoWorkers());
  std::thread late([&] {
    ASSERT_TRUE(membership.Register({Role::kPs, 0}, "", 1).ok());
    ASSERT_TRUE(membership.Register({Role::kPs, 1}, "", 1).ok());
    ASSERT_TRUE(membership.Register({Role::kWorker, 0}, "", 1).ok());
    ASSERT_TRUE(membership.Heard({Role::kWorker, 1}).ok());  // a custom loop's poll
  });
  EXPECT_TRUE(membership.WaitForAll(absl::Seconds(30)).ok());
  late.join();
}

TEST(MembershipTest, WaitForAllStopsWhenCancelled) {
  Membership membership(TwoPsTwoWorkers());
  absl::Status status = membership.WaitForAll(absl::Seconds(30), [] { return true; });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
}

TEST(MembershipTest, UnknownTaskAndStaleIncarnationAreRejected) {
  Membership membership(TwoPsTwoWorkers());
  EXPECT_EQ(membership.Register({Role::kWorker, 2}, "h:9", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(membership.Register({Role::kEvaluator, 0}, "h:9", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(membership.Register({Role::kChief, 0}, "h:1", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(membership.Heard({Role::kWorker, -1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(membership.ReportLost({Role::kPs, 2}, absl::UnavailableError("x")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(membership.State({Role::kWorker, 9}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(membership.Heartbeat({Role::kWorker, 0}, 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(membership.CheckKnown({Role::kWorker, 7}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(membership.CheckKnown({Role::kPs, 1}).ok());
  ASSERT_TRUE(membership.Register({Role::kWorker, 0}, "h:4", 1).ok());
  ASSERT_TRUE(membership.Register({Role::kWorker, 0}, "h:4", 2).ok());  // restarted
  EXPECT_EQ(membership.Heartbeat({Role::kWorker, 0}, 1).status().code(),
            absl::StatusCode::kNotFound);
  auto over = membership.Heartbeat({Role::kWorker, 0}, 2);
  ASSERT_TRUE(over.ok());
  EXPECT_FALSE(*over);
  membership.EndJob();
  EXPECT_TRUE(*membership.Heartbeat({Role::kWorker, 0}, 2));
}

// A heartbeat's memory figures are the member's until the next one; a negative one is
// refused and changes nothing; a new incarnation starts with none.
TEST(MembershipTest, HeartbeatsCarryTheTasksMemory) {
  Membership membership(TwoPsTwoWorkers());
  ASSERT_TRUE(membership.Register({Role::kPs, 1}, "h:3", 7).ok());
  auto memory_of_ps1 = [&] { return membership.Snapshot()[1].memory; };
  EXPECT_EQ(memory_of_ps1().peak_resident_bytes, 0);
  ASSERT_TRUE(membership.Heartbeat({Role::kPs, 1}, 7, {100 << 20, 300 << 20}).ok());
  EXPECT_EQ(memory_of_ps1().resident_bytes, 100 << 20);
  EXPECT_EQ(memory_of_ps1().peak_resident_bytes, 300 << 20);
  EXPECT_EQ(membership.Heartbeat({Role::kPs, 1}, 7, {-1, 5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(memory_of_ps1().resident_bytes, 100 << 20);
  EXPECT_EQ(membership.Snapshot()[0].memory.resident_bytes, 0);  // ps 0 never said
  ASSERT_TRUE(membership.Register({Role::kPs, 1}, "h:3", 8).ok());  // restarted
  EXPECT_EQ(memory_of_ps1().peak_resident_bytes, 0);
}

TEST(MembershipTest, IsLiveNeedsARegistrationAndAFreshHeartbeat) {
  StepClock clock;
  Membership::Options options;
  options.now = clock.Fn();
  Membership membership(TwoPsTwoWorkers(), options);
  EXPECT_FALSE(membership.IsLive({Role::kWorker, 1}, absl::Seconds(5)));
  ASSERT_TRUE(membership.Register({Role::kWorker, 1}, "h:5", 3).ok());
  EXPECT_TRUE(membership.IsLive({Role::kWorker, 1}, absl::Seconds(5)));
  clock.Advance(absl::Milliseconds(50));
  EXPECT_FALSE(membership.IsLive({Role::kWorker, 1}, absl::Milliseconds(10)));
  ASSERT_TRUE(membership.Heartbeat({Role::kWorker, 1}, 3).ok());
  EXPECT_TRUE(membership.IsLive({Role::kWorker, 1}, absl::Seconds(5)));
  EXPECT_FALSE(membership.IsLive({Role::kWorker, 7}, absl::Seconds(5)));
  // Reported lost: not live, however fresh its last heartbeat, until the next one.
  ASSERT_TRUE(membership.ReportLost({Role::kWorker, 1}, absl::UnavailableError("reset")).ok());
  EXPECT_FALSE(membership.IsLive({Role::kWorker, 1}, absl::Seconds(5)));
  ASSERT_TRUE(membership.Heartbeat({Role::kWorker, 1}, 3).ok());
  EXPECT_TRUE(membership.IsLive({Role::kWorker, 1}, absl::Seconds(5)));
}

// The states and their rules, fed by heartbeats (the chief daemon): registered, alive,
// lost after a missed deadline, back with the next heartbeat.
TEST(MembershipTest, AMissedDeadlineLosesATaskAndAHeartbeatBringsItBack) {
  StepClock clock;
  Changes changes;
  Membership::Options options;
  options.lost_after = absl::Seconds(5);
  options.now = clock.Fn();
  options.on_change = changes.Fn();
  Membership membership(TwoPsTwoWorkers(), options);
  EXPECT_EQ(*membership.State({Role::kWorker, 0}), MemberState::kUnregistered);
  ASSERT_TRUE(membership.Register({Role::kWorker, 0}, "h:44", 9).ok());
  EXPECT_EQ(*membership.State({Role::kWorker, 0}), MemberState::kAlive);
  clock.Advance(absl::Seconds(4));
  EXPECT_EQ(*membership.State({Role::kWorker, 0}), MemberState::kAlive);
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(*membership.State({Role::kWorker, 0}), MemberState::kLost);
  EXPECT_EQ(membership.Silent(absl::Seconds(5)), std::vector<std::string>{"worker 0 (h:44)"});
  ASSERT_TRUE(membership.Heartbeat({Role::kWorker, 0}, 9).ok());
  EXPECT_EQ(*membership.State({Role::kWorker, 0}), MemberState::kAlive);
  EXPECT_TRUE(membership.Silent(absl::Seconds(5)).empty());

  std::vector<MemberStatus> snapshot = membership.Snapshot();
  ASSERT_EQ(snapshot.size(), 4u);
  EXPECT_EQ(snapshot[0].task.type, Role::kPs);
  EXPECT_EQ(snapshot[0].state, MemberState::kUnregistered);
  EXPECT_FALSE(snapshot[0].registered);
  EXPECT_EQ(snapshot[2].task.type, Role::kWorker);
  EXPECT_EQ(snapshot[2].task.index, 0);
  EXPECT_EQ(snapshot[2].address, "h:44");
  EXPECT_EQ(snapshot[2].state, MemberState::kAlive);
  EXPECT_EQ(snapshot[2].times_back, 1);
  EXPECT_EQ(snapshot[2].since_heard, absl::ZeroDuration());

  // The deadline passing tells nobody; the registration and the return do.
  const auto seen = changes.Get();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_tuple(std::string("worker 0 (h:44)"), MemberState::kUnregistered,
                                     MemberState::kAlive));
  EXPECT_EQ(seen[1], std::make_tuple(std::string("worker 0 (h:44)"), MemberState::kLost,
                                     MemberState::kAlive));
}

// The same rules fed by polls and by the scheduler's lost workers (a custom loop): no
// deadline, lost when reported, back when a poll answers.
TEST(MembershipTest, PollsRegisterAReportedLossLosesAndTheNextAnswerBringsBack) {
  StepClock clock;
  Changes changes;
  Membership::Options options;
  options.jobs = {Role::kWorker};
  options.now = clock.Fn();
  options.on_change = changes.Fn();
  Membership membership(TwoPsTwoWorkers(), options);
  ASSERT_EQ(membership.Snapshot().size(), 2u);
  EXPECT_EQ(membership.CheckKnown({Role::kPs, 0}).code(), absl::StatusCode::kInvalidArgument);
  // Never heard from: a reported loss changes nothing.
  ASSERT_TRUE(membership.ReportLost({Role::kWorker, 1}, absl::UnavailableError("refused")).ok());
  EXPECT_EQ(*membership.State({Role::kWorker, 1}), MemberState::kUnregistered);
  ASSERT_TRUE(membership.Heard({Role::kWorker, 1}).ok());
  EXPECT_EQ(*membership.State({Role::kWorker, 1}), MemberState::kAlive);
  clock.Advance(absl::Hours(1));  // no deadline without lost_after
  EXPECT_EQ(*membership.State({Role::kWorker, 1}), MemberState::kAlive);
  ASSERT_TRUE(
      membership.ReportLost({Role::kWorker, 1}, absl::UnavailableError("connection reset")).ok());
  ASSERT_TRUE(membership.ReportLost({Role::kWorker, 1}, absl::UnavailableError("again")).ok());
  EXPECT_EQ(*membership.State({Role::kWorker, 1}), MemberState::kLost);
  ASSERT_TRUE(membership.Heard({Role::kWorker, 1}).ok());
  EXPECT_EQ(*membership.State({Role::kWorker, 1}), MemberState::kAlive);
  EXPECT_EQ(membership.Snapshot()[1].times_back, 1);

  const auto seen = changes.Get();
  ASSERT_EQ(seen.size(), 3u);  // the second report of the same loss is not a change
  EXPECT_EQ(std::get<0>(seen[1]), "worker 1 (h:5): connection reset");
  EXPECT_EQ(std::get<1>(seen[1]), MemberState::kAlive);
  EXPECT_EQ(std::get<2>(seen[1]), MemberState::kLost);
  EXPECT_EQ(std::get<1>(seen[2]), MemberState::kLost);
  EXPECT_EQ(std::get<2>(seen[2]), MemberState::kAlive);
}

TEST(MembershipTest, StateNamesAreStable) {
  EXPECT_EQ(MemberStateName(MemberState::kUnregistered), "unregistered");
  EXPECT_EQ(MemberStateName(MemberState::kAlive), "alive");
  EXPECT_EQ(MemberStateName(MemberState::kLost), "lost");
}

}  // namespace
}  // namespace pstrain::distribute
