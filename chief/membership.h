#ifndef PSTRAIN_CHIEF_MEMBERSHIP_H_
#define PSTRAIN_CHIEF_MEMBERSHIP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "common/daemon/shutdown_signal.h"
#include "proto/chief.pb.h"

namespace pstrain {

// Who is in the job: the ps and worker tasks the cluster spec names, whether each has
// registered, and when it last sent a heartbeat. Knows nothing of gRPC
// (chief/rpc/chief_service.h adapts it). Thread-safe.
class Membership {
 public:
  // Expects every "ps" and "worker" task of `cluster`.
  explicit Membership(const ClusterSpec& cluster);

  // Records a task's registration; a new incarnation replaces the old one.
  // Errors: INVALID_ARGUMENT a task type or index the cluster spec does not name.
  absl::Status Register(const std::string& type, int index, const std::string& address,
                        int64_t incarnation) ABSL_LOCKS_EXCLUDED(mu_);

  // Records a heartbeat; returns true once the job is over (the task should exit).
  // Errors: INVALID_ARGUMENT unknown task; NOT_FOUND the task has not registered, or
  //         this incarnation was replaced by a newer one.
  absl::StatusOr<bool> Heartbeat(const std::string& type, int index, int64_t incarnation)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every expected task has registered.
  // Errors: DEADLINE_EXCEEDED after `timeout`, naming every task that never came
  //         ("worker 1 (localhost:4003)"); CANCELLED when `abort` is requested first.
  absl::Status WaitForAll(absl::Duration timeout, const ShutdownSignal* abort)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Errors: INVALID_ARGUMENT a task the cluster spec does not name.
  absl::Status CheckKnown(const std::string& type, int index) const ABSL_LOCKS_EXCLUDED(mu_);

  // From now on heartbeats answer "shutdown".
  void EndJob() ABSL_LOCKS_EXCLUDED(mu_);

  // Tasks whose last heartbeat (or registration) is older than `age`.
  std::vector<std::string> Silent(absl::Duration age) const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the task is registered and its last heartbeat (or registration) is at most
  // `max_age` old. False for a task the cluster spec does not name.
  bool IsLive(const std::string& type, int index, absl::Duration max_age) const
      ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<TaskState> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Member {
    std::string type;
    int index = 0;
    std::string address;  // from the cluster spec; replaced by what the task reports
    bool registered = false;
    int64_t incarnation = 0;
    absl::Time last_seen;
  };

  // Errors: INVALID_ARGUMENT unknown task.
  absl::StatusOr<Member*> Find(const std::string& type, int index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const Member*> Find(const std::string& type, int index) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool AllRegistered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Member> members_ ABSL_GUARDED_BY(mu_);
  bool job_over_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_MEMBERSHIP_H_
