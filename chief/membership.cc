#include "chief/membership.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace pstrain {

distribute::Membership::Options ChiefMembershipOptions(absl::Duration lost_after) {
  distribute::Membership::Options options;
  options.jobs = {Role::kPs, Role::kWorker};
  options.lost_after = lost_after;
  options.on_change = [](const std::string& task, distribute::MemberState from,
                         distribute::MemberState to) {
    // A first registration is logged by the service with the address it came from, and a
    // lost worker by the coordinator with what happens to its work: only the return of a
    // task that was lost (its heartbeats missed, or its work failed) is news here.
    if (from == distribute::MemberState::kLost && to == distribute::MemberState::kAlive) {
      LogInfo(absl::StrCat(task, " is heard from again"));
    }
  };
  return options;
}

std::vector<TaskState> TaskStates(const distribute::Membership& membership) {
  std::vector<TaskState> states;
  for (const distribute::MemberStatus& m : membership.Snapshot()) {
    TaskState s;
    s.set_task_type(std::string(RoleName(m.task.type)));
    s.set_task_index(m.task.index);
    s.set_address(m.address);
    s.set_registered(m.registered);
    if (m.registered) s.set_last_heartbeat_age_ms(absl::ToInt64Milliseconds(m.since_heard));
    s.set_resident_memory_bytes(m.memory.resident_bytes);
    s.set_peak_resident_memory_bytes(m.memory.peak_resident_bytes);
    states.push_back(std::move(s));
  }
  return states;
}

}  // namespace pstrain
