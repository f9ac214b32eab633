#ifndef PSTRAIN_DISTRIBUTE_MEMBERSHIP_H_
#define PSTRAIN_DISTRIBUTE_MEMBERSHIP_H_

// Who is in the job and who is alive: the one membership both users of the
// parameter-server stack keep (README "Architecture"). Knows nothing of gRPC or of how a
// task is heard from; its users feed it:
//  - the chief daemon from its RegisterTask and Heartbeat RPCs (chief/rpc/chief_service.h),
//    and the coordinator's lost workers (ReportLost);
//  - a custom loop's chief (pstrain/internal/chief_task.h) from the status
//    polls it makes anyway (Heard: WatchedWorker, distribute/watched_worker.h, turns the
//    scheduler's Ready polls into them) and the scheduler's lost workers (ReportLost).
//
// The rules, the same for both:
//  - A task the cluster spec names is kUnregistered until it registers (Register) or is
//    first heard from (Heard).
//  - kAlive while it was heard from (Register, Heartbeat, Heard) within
//    Options::lost_after and not reported lost since.
//  - kLost when it missed that deadline, or someone saw it fail (ReportLost) and it has
//    not been heard from since.
//  - Back: heard from again while lost (a heartbeat, a re-registration with a new
//    incarnation, a poll that answers). It is kAlive again, times_back counts it, and
//    Options::on_change is told.
//
// Thread-safe: every method may be called from any thread.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "common/process_memory.h"

namespace pstrain::distribute {

enum class MemberState {
  kUnregistered,  // named by the cluster spec, never heard from
  kAlive,
  kLost,
};

// "unregistered", "alive", "lost".
absl::string_view MemberStateName(MemberState state);

// One member as Snapshot reports it.
struct MemberStatus {
  TaskId task;          // the cluster spec's job (Role::kPs, Role::kWorker) and index
  std::string address;  // from the cluster spec, or what the task registered with
  MemberState state = MemberState::kUnregistered;
  bool registered = false;
  // Since it was last heard from (zero while unregistered).
  absl::Duration since_heard;
  // Times it came back after being lost.
  int64_t times_back = 0;
  // As its last heartbeat reported it (zeros: not known; a new incarnation starts over).
  ProcessMemory memory;
};

class Membership {
 public:
  struct Options {
    // The jobs of the cluster spec whose tasks are members, in Snapshot's order.
    std::vector<Role> jobs = {Role::kPs, Role::kWorker};
    // A registered task not heard from for longer is lost. Infinite (a custom loop, whose
    // polls are not periodic): only ReportLost loses a task.
    absl::Duration lost_after = absl::InfiniteDuration();
    // Told of every change of state that a feed makes: kUnregistered -> kAlive (the first
    // registration), kAlive -> kLost (ReportLost), kLost -> kAlive (back). A deadline
    // passing is seen by the readers, and told nobody. `task` is "worker 1 (host:port)".
    // Called with no lock of the membership's held; may be empty.
    std::function<void(const std::string& task, MemberState from, MemberState to)> on_change;
    // The clock (tests step their own).
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };

  // Expects every task of options.jobs in `cluster`.
  explicit Membership(const ClusterSpec& cluster) : Membership(cluster, Options()) {}
  Membership(const ClusterSpec& cluster, Options options);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Feeds.

  // Records a task's registration; a new incarnation replaces the old one. An empty
  // `address` keeps the cluster spec's.
  // Errors: INVALID_ARGUMENT a task the membership does not name.
  absl::Status Register(const TaskId& task, const std::string& address, int64_t incarnation)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Records a heartbeat of the registered incarnation, and the memory it reports (all
  // zeros: not known); returns true once the job is over (EndJob: the task should exit).
  // Errors: INVALID_ARGUMENT unknown task, a negative memory figure; NOT_FOUND the task
  //         has not registered, or this incarnation was replaced by a newer one (the
  //         heartbeat is not counted). Nothing is recorded on an error.
  absl::StatusOr<bool> Heartbeat(const TaskId& task, int64_t incarnation, ProcessMemory memory = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // The task answered a call (a status poll): registers it the first time (incarnation
  // 0, the cluster spec's address) and counts as a heartbeat after.
  // Errors: INVALID_ARGUMENT unknown task.
  absl::Status Heard(const TaskId& task) ABSL_LOCKS_EXCLUDED(mu_);

  // Someone saw the task fail (`why`: the scheduler lost the worker): kLost until it is
  // heard from again. A task never heard from stays kUnregistered.
  // Errors: INVALID_ARGUMENT unknown task.
  absl::Status ReportLost(const TaskId& task, const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);

  // From now on heartbeats answer "the job is over".
  void EndJob() ABSL_LOCKS_EXCLUDED(mu_);

  // Readers.

  // Errors: INVALID_ARGUMENT a task the membership does not name.
  absl::StatusOr<MemberState> State(const TaskId& task) const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the task is registered, not reported lost since it was last heard from, and
  // was heard from at most `max_age` ago (a stricter deadline than lost_after, e.g. the
  // chief's rejoin rule). False for a task the membership does not name.
  bool IsLive(const TaskId& task, absl::Duration max_age) const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every member has registered (or been heard from).
  // Errors: DEADLINE_EXCEEDED after `timeout`, naming every task that never came
  //         ("worker 1 (localhost:4003)"); CANCELLED when `cancelled` (may be empty, asked
  //         about every 100 ms) answers true first.
  absl::Status WaitForAll(absl::Duration timeout,
                          const std::function<bool()>& cancelled = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Errors: INVALID_ARGUMENT a task the membership does not name.
  absl::Status CheckKnown(const TaskId& task) const ABSL_LOCKS_EXCLUDED(mu_);

  // Registered tasks last heard from longer than `age` ago ("ps 1 (host:port)").
  std::vector<std::string> Silent(absl::Duration age) const ABSL_LOCKS_EXCLUDED(mu_);

  // Every member, in Options::jobs order, then by index.
  std::vector<MemberStatus> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Member {
    TaskId task;
    std::string address;  // from the cluster spec; replaced by what the task reports
    bool registered = false;
    int64_t incarnation = 0;
    absl::Time last_heard;
    // ReportLost was called after last_heard.
    bool reported_lost = false;
    int64_t times_back = 0;
    ProcessMemory memory;
  };
  // A change of state to tell on_change about once the lock is released.
  struct Change {
    std::string task;
    MemberState from = MemberState::kUnregistered;
    MemberState to = MemberState::kUnregistered;
  };

  // Errors: INVALID_ARGUMENT unknown task.
  absl::StatusOr<Member*> Find(const TaskId& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const Member*> Find(const TaskId& task) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  MemberState StateOf(const Member& m, absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Records that `m` was heard from now; a change of state (first registration, back)
  // goes to `change`.
  void MarkHeard(Member* m, Change* change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllRegistered() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Tell(const Change& change) const ABSL_LOCKS_EXCLUDED(mu_);
  static std::string NameOf(const Member& m);

  const Options options_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::vector<Member> members_ ABSL_GUARDED_BY(mu_);
  bool job_over_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pstrain::distribute

#endif  // PSTRAIN_DISTRIBUTE_MEMBERSHIP_H_
