#include "chief/membership.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {

Membership::Membership(const ClusterSpec& cluster) {
  for (const char* type : {"ps", "worker"}) {
    const std::vector<std::string>& addresses = cluster.tasks(type);
    for (size_t i = 0; i < addresses.size(); ++i) {
      Member m;
      m.type = type;
      m.index = static_cast<int>(i);
      m.address = addresses[i];
      members_.push_back(std::move(m));
    }
  }
}

absl::StatusOr<const Membership::Member*> Membership::Find(const std::string& type,
                                                          int index) const {
  for (const Member& m : members_) {
    if (m.type == type && m.index == index) return &m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("task ", type, " ", index, " is not in this job's cluster spec"));
}

absl::StatusOr<Membership::Member*> Membership::Find(const std::string& type, int index) {
  absl::StatusOr<const Member*> found = static_cast<const Membership*>(this)->Find(type, index);
  if (!found.ok()) return found.status();
  return const_cast<Member*>(*found);
}

absl::Status Membership::CheckKnown(const std::string& type, int index) const {
  absl::ReaderMutexLock lock(&mu_);
  return Find(type, index).status();
}

absl::Status Membership::Register(const std::string& type, int index,
                                  const std::string& address, int64_t incarnation) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Member*> m = Find(type, index);
  if (!m.ok()) return m.status();
  (*m)->registered = true;
  (*m)->incarnation = incarnation;
  if (!address.empty()) (*m)->address = address;
  (*m)->last_seen = absl::Now();
  return absl::OkStatus();
}

absl::StatusOr<bool> Membership::Heartbeat(const std::string& type, int index,
                                           int64_t incarnation) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Member*> m = Find(type, index);
  if (!m.ok()) return m.status();
  if (!(*m)->registered || (*m)->incarnation != incarnation) {
    return absl::NotFoundError(
        absl::StrCat("task ", type, " ", index, " is not registered with this incarnation"));
  }
  (*m)->last_seen = absl::Now();
  return job_over_;
}

bool Membership::AllRegistered() const {
  for (const Member& m : members_) {
    if (!m.registered) return false;
  }
  return true;
}

absl::Status Membership::WaitForAll(absl::Duration timeout, const ShutdownSignal* abort) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(this, &Membership::AllRegistered),
                               absl::Milliseconds(100))) {
        return absl::OkStatus();
      }
      if (absl::Now() >= give_up) {
        std::vector<std::string> missing;
        for (const Member& m : members_) {
          if (!m.registered) missing.push_back(absl::StrCat(m.type, " ", m.index, " (", m.address, ")"));
        }
        return absl::DeadlineExceededError(
            absl::StrCat("tasks that never registered within ", absl::FormatDuration(timeout),
                         ": ", absl::StrJoin(missing, ", ")));
      }
    }
    if (abort != nullptr && abort->requested()) {
      return absl::CancelledError("shut down while waiting for tasks to register");
    }
  }
}

void Membership::EndJob() {
  absl::MutexLock lock(&mu_);
  job_over_ = true;
}

std::vector<std::string> Membership::Silent(absl::Duration age) const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  std::vector<std::string> silent;
  for (const Member& m : members_) {
    if (m.registered && now - m.last_seen > age) {
      silent.push_back(absl::StrCat(m.type, " ", m.index, " (", m.address, ")"));
    }
  }
  return silent;
}

bool Membership::IsLive(const std::string& type, int index, absl::Duration max_age) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<const Member*> m = Find(type, index);
  return m.ok() && (*m)->registered && absl::Now() - (*m)->last_seen <= max_age;
}

std::vector<TaskState> Membership::Snapshot() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  std::vector<TaskState> states;
  for (const Member& m : members_) {
    TaskState s;
    s.set_task_type(m.type);
    s.set_task_index(m.index);
    s.set_address(m.address);
    s.set_registered(m.registered);
    if (m.registered) s.set_last_heartbeat_age_ms(absl::ToInt64Milliseconds(now - m.last_seen));
    states.push_back(std::move(s));
  }
  return states;
}

}  // namespace pstrain
