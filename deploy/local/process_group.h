#ifndef PSTRAIN_DEPLOY_LOCAL_PROCESS_GROUP_H_
#define PSTRAIN_DEPLOY_LOCAL_PROCESS_GROUP_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain {

// Child processes started together and watched together, as an orchestrator watches a
// job's pods: their stdout and stderr are read line by line, and none outlives the group
// (each child gets SIGKILL if the parent dies, and the destructor kills survivors).
// Not thread-safe: one thread drives a group.
class ProcessGroup {
 public:
  struct Spec {
    std::string name;                         // "worker1": used in messages
    std::string binary;                       // path to execute
    std::vector<std::string> args;            // without argv[0]
    std::map<std::string, std::string> env;   // added to the parent's environment
  };
  struct Exit {
    std::string name;
    int exit_code = -1;   // when it exited normally
    int signal = 0;       // when a signal ended it
    int restarts = 0;     // times the restart policy started it again
    // The most resident memory it held (the kernel's ru_maxrss from wait4, in bytes; the
    // larger of its own and that of any child it reaped), 0 until it exited. Exact, where
    // a task's own reports (heartbeats) may be older than its peak.
    int64_t peak_resident_bytes = 0;
  };
  // Called for every line a child writes (without the newline).
  using LineCallback =
      std::function<void(int index, const std::string& name, bool is_stderr, const std::string& line)>;

  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  ~ProcessGroup();

  // Starts a child. Errors: INTERNAL when fork or pipe fails; a binary that cannot be
  // executed shows as an exit with code 127 and a line on its stderr.
  absl::Status Start(const Spec& spec);

  // Runs until every child has exited. When one exits with a failure, the others get
  // `grace` to finish by themselves, then SIGTERM, then SIGKILL 5 s later; when
  // `timeout` passes, every child is stopped the same way. `interrupted` (may be null) is
  // polled: when it returns true the children get SIGTERM at once.
  // Returns each child's exit, in start order.
  std::vector<Exit> Wait(absl::Duration timeout, absl::Duration grace, const LineCallback& on_line,
                         const std::function<bool()>& interrupted);

  // As an orchestrator restarts a failed pod: a child that exits with a failure and for
  // which `should_restart` returns true is started again with the same spec (its output
  // keeps its name) instead of stopping the group, `delay` after it died (Kubernetes backs
  // off 10 s before restarting a crashed container; zero restarts at once). Set before
  // Wait().
  void SetRestartPolicy(std::function<bool(const Exit&)> should_restart,
                        absl::Duration delay = absl::ZeroDuration()) {
    should_restart_ = std::move(should_restart);
    restart_delay_ = delay;
  }

  // Starts at once the child named `name` that died and waits for its restart (the delay
  // of SetRestartPolicy not over yet). With absl::InfiniteDuration() as the delay, a dead
  // child comes back only by this call: a test chooses the moment a killed task returns,
  // after what it must see while the task is gone. Call it from Wait's callbacks.
  // Errors: NOT_FOUND no child of that name waits for a restart.
  absl::Status RestartNow(const std::string& name);

  // Sends `signal` to the child named `name` if it still runs. Errors: NOT_FOUND.
  absl::Status Signal(const std::string& name, int signal);

  // The process id of the running child named `name` (to look at it in /proc).
  // Errors: NOT_FOUND.
  absl::StatusOr<pid_t> Pid(const std::string& name) const;

 private:
  struct Child {
    Spec spec;
    pid_t pid = -1;
    int out_fd = -1;
    int err_fd = -1;
    std::string out_buffer;
    std::string err_buffer;
    bool running = true;
    // Dead and due to be started again at restart_at (SetRestartPolicy's delay).
    bool restart_pending = false;
    absl::Time restart_at;
    Exit exit;
  };
  // Forks and execs `spec`, its stdout and stderr on pipes. Errors: INTERNAL.
  absl::StatusOr<Child> Spawn(const Spec& spec);
  void SignalAll(int signal);
  void Drain(int index, bool is_stderr, const LineCallback& on_line, bool flush);
  // Reads what an exited child left in its pipes, then closes them.
  void DrainToEnd(int index, const LineCallback& on_line);
  // Starts child `index` again with its spec (a restart); false when it cannot be started.
  bool Respawn(int index, const LineCallback& on_line);

  // When Wait stops the group: SIGTERM at term_at, SIGKILL 5 s later. The earliest
  // reason to stop wins; none is taken once SIGTERM went out.
  struct StopSchedule {
    absl::Time term_at = absl::InfiniteFuture();
    absl::Time kill_at = absl::InfiniteFuture();
    bool term_sent = false;
    void StopAt(absl::Time term);
    // Sends what is due at `now` to every running child of `group`.
    void Tick(absl::Time now, ProcessGroup* group);
  };
  // Wait's steps, one pass each: whether a child runs or waits for its restart, whether
  // any pipe is still open; read what the children wrote (polling up to 100 ms); reap
  // the children that exited (restarting them by the policy, else scheduling the stop
  // after `grace`); start the restarts that are due. KillAndDrainEverything ends what
  // exited children left holding their pipes, and reads the rest.
  bool AnyRunning() const;
  bool AnyOutputOpen() const;
  void ReadOutputs(const LineCallback& on_line);
  void ReapExited(absl::Duration grace, const LineCallback& on_line, StopSchedule* stop);
  void RunDueRestarts(absl::Duration grace, const LineCallback& on_line, StopSchedule* stop);
  void KillAndDrainEverything(const LineCallback& on_line);

  std::vector<Child> children_;
  std::function<bool(const Exit&)> should_restart_;
  absl::Duration restart_delay_ = absl::ZeroDuration();
};

// "exited with code 1", "killed by signal 9".
std::string DescribeExit(const ProcessGroup::Exit& exit);

}  // namespace pstrain

#endif  // PSTRAIN_DEPLOY_LOCAL_PROCESS_GROUP_H_
