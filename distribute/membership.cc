#include "distribute/membership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain::distribute {

absl::string_view MemberStateName(MemberState state) {
  switch (state) {
    case MemberState::kUnregistered:
      return "unregistered";
    case MemberState::kAlive:
      return "alive";
    case MemberState::kLost:
      return "lost";
  }
  return "unknown";
}

Membership::Membership(const ClusterSpec& cluster, Options options)
    : options_(std::move(options)) {
  for (const Role role : options_.jobs) {
    const std::vector<std::string>& addresses = cluster.tasks(role);
    for (size_t i = 0; i < addresses.size(); ++i) {
      Member m;
      m.task = {role, static_cast<int>(i)};
      m.address = addresses[i];
      members_.push_back(std::move(m));
    }
  }
}

std::string Membership::NameOf(const Member& m) {
  return absl::StrCat(RoleName(m.task.type), " ", m.task.index, " (", m.address, ")");
}

absl::StatusOr<const Membership::Member*> Membership::Find(const TaskId& task) const {
  for (const Member& m : members_) {
    if (m.task == task) return &m;
  }
  return absl::InvalidArgumentError(absl::StrCat("task ", RoleName(task.type), " ", task.index,
                                                 " is not in this job's cluster spec"));
}

absl::StatusOr<Membership::Member*> Membership::Find(const TaskId& task) {
  absl::StatusOr<const Member*> found = static_cast<const Membership*>(this)->Find(task);
  if (!found.ok()) return found.status();
  return const_cast<Member*>(*found);
}

MemberState Membership::StateOf(const Member& m, absl::Time now) const {
  if (!m.registered) return MemberState::kUnregistered;
  if (m.reported_lost || now - m.last_heard > options_.lost_after) return MemberState::kLost;
  return MemberState::kAlive;
}

void Membership::MarkHeard(Member* m, Change* change) {
  const absl::Time now = options_.now();
  const MemberState before = StateOf(*m, now);
  m->registered = true;
  m->reported_lost = false;
  m->last_heard = now;
  if (before == MemberState::kLost) ++m->times_back;
  if (before != MemberState::kAlive) *change = {NameOf(*m), before, MemberState::kAlive};
}

void Membership::Tell(const Change& change) const {
  if (options_.on_change && change.from != change.to) {
    options_.on_change(change.task, change.from, change.to);
  }
}

absl::Status Membership::CheckKnown(const TaskId& task) const {
  absl::ReaderMutexLock lock(&mu_);
  return Find(task).status();
}

absl::Status Membership::Register(const TaskId& task, const std::string& address,
                                  int64_t incarnation) {
  Change change;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Member*> m = Find(task);
    if (!m.ok()) return m.status();
    if ((*m)->incarnation != incarnation) (*m)->memory = ProcessMemory();
    (*m)->incarnation = incarnation;
    if (!address.empty()) (*m)->address = address;
    MarkHeard(*m, &change);
  }
  Tell(change);
  return absl::OkStatus();
}

absl::StatusOr<bool> Membership::Heartbeat(const TaskId& task, int64_t incarnation,
                                           ProcessMemory memory) {
  if (memory.resident_bytes < 0 || memory.peak_resident_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", RoleName(task.type), " ", task.index, " reports a negative memory size (resident ",
        memory.resident_bytes, ", peak ", memory.peak_resident_bytes, ")"));
  }
  Change change;
  bool over = false;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Member*> m = Find(task);
    if (!m.ok()) return m.status();
    if (!(*m)->registered || (*m)->incarnation != incarnation) {
      return absl::NotFoundError(absl::StrCat("task ", RoleName(task.type), " ", task.index,
                                              " is not registered with this incarnation"));
    }
    MarkHeard(*m, &change);
    (*m)->memory = memory;
    over = job_over_;
  }
  Tell(change);
  return over;
}

absl::Status Membership::Heard(const TaskId& task) {
  Change change;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Member*> m = Find(task);
    if (!m.ok()) return m.status();
    MarkHeard(*m, &change);
  }
  Tell(change);
  return absl::OkStatus();
}

absl::Status Membership::ReportLost(const TaskId& task, const absl::Status& why) {
  Change change;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Member*> m = Find(task);
    if (!m.ok()) return m.status();
    if (!(*m)->registered) return absl::OkStatus();
    const MemberState before = StateOf(**m, options_.now());
    (*m)->reported_lost = true;
    if (before != MemberState::kLost) {
      change = {absl::StrCat(NameOf(**m), ": ", why.message()), before, MemberState::kLost};
    }
  }
  Tell(change);
  return absl::OkStatus();
}

void Membership::EndJob() {
  absl::MutexLock lock(&mu_);
  job_over_ = true;
}

absl::StatusOr<MemberState> Membership::State(const TaskId& task) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<const Member*> m = Find(task);
  if (!m.ok()) return m.status();
  return StateOf(**m, options_.now());
}

bool Membership::IsLive(const TaskId& task, absl::Duration max_age) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<const Member*> m = Find(task);
  return m.ok() && StateOf(**m, options_.now()) == MemberState::kAlive &&
         options_.now() - (*m)->last_heard <= max_age;
}

bool Membership::AllRegistered() const {
  for (const Member& m : members_) {
    if (!m.registered) return false;
  }
  return true;
}

absl::Status Membership::WaitForAll(absl::Duration timeout,
                                    const std::function<bool()>& cancelled) {
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
          if (!m.registered) missing.push_back(NameOf(m));
        }
        return absl::DeadlineExceededError(
            absl::StrCat("tasks that never registered within ", absl::FormatDuration(timeout),
                         ": ", absl::StrJoin(missing, ", ")));
      }
    }
    if (cancelled && cancelled()) {
      return absl::CancelledError("shut down while waiting for tasks to register");
    }
  }
}

std::vector<std::string> Membership::Silent(absl::Duration age) const {
  absl::ReaderMutexLock lock(&mu_);
  const absl::Time now = options_.now();
  std::vector<std::string> silent;
  for (const Member& m : members_) {
    if (m.registered && now - m.last_heard > age) silent.push_back(NameOf(m));
  }
  return silent;
}

std::vector<MemberStatus> Membership::Snapshot() const {
  absl::ReaderMutexLock lock(&mu_);
  const absl::Time now = options_.now();
  std::vector<MemberStatus> out;
  for (const Member& m : members_) {
    MemberStatus s;
    s.task = m.task;
    s.address = m.address;
    s.state = StateOf(m, now);
    s.registered = m.registered;
    if (m.registered) s.since_heard = now - m.last_heard;
    s.times_back = m.times_back;
    s.memory = m.memory;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace pstrain::distribute
