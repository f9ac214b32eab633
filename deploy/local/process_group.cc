#include "deploy/local/process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace pstrain {

std::string DescribeExit(const ProcessGroup::Exit& exit) {
  if (exit.signal != 0) return absl::StrCat("killed by signal ", exit.signal);
  return absl::StrCat("exited with code ", exit.exit_code);
}

ProcessGroup::~ProcessGroup() {
  SignalAll(SIGKILL);
  for (Child& c : children_) {
    if (c.running) waitpid(c.pid, nullptr, 0);
    if (c.out_fd >= 0) close(c.out_fd);
    if (c.err_fd >= 0) close(c.err_fd);
  }
}

absl::Status ProcessGroup::Start(const Spec& spec) {
  absl::StatusOr<Child> child = Spawn(spec);
  if (!child.ok()) return child.status();
  children_.push_back(*std::move(child));
  return absl::OkStatus();
}

absl::StatusOr<ProcessGroup::Child> ProcessGroup::Spawn(const Spec& spec) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  // Everything the child needs is prepared before fork(): after it, only
  // async-signal-safe calls are allowed.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (spec.env.count(key) == 0) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : spec.env) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings = {spec.binary};
  arg_strings.insert(arg_strings.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (std::string& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // A child never outlives the launcher, even when the launcher is SIGKILLed.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    // Its own process group, so a signal reaches whatever the child itself started.
    setpgid(0, 0);
    // The launcher blocks SIGINT/SIGTERM for its own sigwait thread; children get
    // default dispositions back.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    const char* msg = "cannot execute the binary\n";
    ssize_t ignored = write(STDERR_FILENO, msg, strlen(msg));
    (void)ignored;
    _exit(127);
  }
  // Here too, not only in the child: until the child has run its setpgid, its group does
  // not exist, and a Signal sent right after Start (kill(-pid)) would be lost. Whichever
  // of the two runs first makes it; the later one fails harmlessly (EACCES after exec).
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(err_pipe[1]);
  Child child;
  child.spec = spec;
  child.pid = pid;
  child.out_fd = out_pipe[0];
  child.err_fd = err_pipe[0];
  child.exit.name = spec.name;
  return child;
}

void ProcessGroup::DrainToEnd(int index, const LineCallback& on_line) {
  for (bool is_stderr : {false, true}) {
    int& fd = is_stderr ? children_[index].err_fd : children_[index].out_fd;
    if (fd < 0) continue;
    // The writer has exited; bounded by a poll timeout in case something it started still
    // holds the pipe open.
    pollfd p{fd, POLLIN, 0};
    char chunk[4096];
    while (poll(&p, 1, 200) > 0) {
      const ssize_t n = read(fd, chunk, sizeof(chunk));
      if (n <= 0) break;
      (is_stderr ? children_[index].err_buffer : children_[index].out_buffer).append(chunk, n);
    }
    Drain(index, is_stderr, on_line, true);
    close(fd);
    fd = -1;
  }
}

absl::Status ProcessGroup::Signal(const std::string& name, int signal) {
  for (Child& c : children_) {
    if (c.spec.name == name && c.running) {
      kill(-c.pid, signal);
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("no running process ", name));
}

absl::Status ProcessGroup::RestartNow(const std::string& name) {
  for (Child& c : children_) {
    if (c.spec.name == name && c.restart_pending) {
      c.restart_at = absl::InfinitePast();  // Wait's next round starts it
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("no process ", name, " waits for a restart"));
}

absl::StatusOr<pid_t> ProcessGroup::Pid(const std::string& name) const {
  for (const Child& c : children_) {
    if (c.spec.name == name && c.running) return c.pid;
  }
  return absl::NotFoundError(absl::StrCat("no running process ", name));
}

void ProcessGroup::SignalAll(int signal) {
  for (Child& c : children_) {
    if (c.running) kill(-c.pid, signal);
  }
}

void ProcessGroup::Drain(int index, bool is_stderr, const LineCallback& on_line, bool flush) {
  Child& c = children_[index];
  std::string& buffer = is_stderr ? c.err_buffer : c.out_buffer;
  size_t start = 0;
  size_t newline;
  while ((newline = buffer.find('\n', start)) != std::string::npos) {
    on_line(index, c.spec.name, is_stderr, buffer.substr(start, newline - start));
    start = newline + 1;
  }
  buffer.erase(0, start);
  if (flush && !buffer.empty()) {
    on_line(index, c.spec.name, is_stderr, buffer);
    buffer.clear();
  }
}

bool ProcessGroup::Respawn(int index, const LineCallback& on_line) {
  Child& c = children_[index];
  absl::StatusOr<Child> again = Spawn(c.spec);
  if (!again.ok()) return false;
  on_line(index, c.spec.name, true,
          absl::StrCat("launcher: ", c.spec.name, " ", DescribeExit(c.exit), "; restarted (restart ",
                       c.exit.restarts + 1, ")"));
  again->exit.restarts = c.exit.restarts + 1;
  c = *std::move(again);
  return true;
}

void ProcessGroup::StopSchedule::StopAt(absl::Time term) {
  if (!term_sent && term < term_at) {
    term_at = term;
    kill_at = term + absl::Seconds(5);
  }
}

void ProcessGroup::StopSchedule::Tick(absl::Time now, ProcessGroup* group) {
  if (now >= term_at) {
    group->SignalAll(SIGTERM);
    term_sent = true;
    term_at = absl::InfiniteFuture();
  }
  if (now >= kill_at) {
    group->SignalAll(SIGKILL);
    kill_at = absl::InfiniteFuture();
  }
}

bool ProcessGroup::AnyRunning() const {
  for (const Child& c : children_) {
    if (c.running || c.restart_pending) return true;
  }
  return false;
}

bool ProcessGroup::AnyOutputOpen() const {
  for (const Child& c : children_) {
    if (c.out_fd >= 0 || c.err_fd >= 0) return true;
  }
  return false;
}

void ProcessGroup::KillAndDrainEverything(const LineCallback& on_line) {
  for (const Child& c : children_) kill(-c.pid, SIGKILL);
  for (size_t i = 0; i < children_.size(); ++i) {
    for (bool is_stderr : {false, true}) {
      int& fd = is_stderr ? children_[i].err_fd : children_[i].out_fd;
      if (fd < 0) continue;
      Drain(static_cast<int>(i), is_stderr, on_line, true);
      close(fd);
      fd = -1;
    }
  }
}

void ProcessGroup::ReadOutputs(const LineCallback& on_line) {
  std::vector<pollfd> fds;
  std::vector<std::pair<int, bool>> owners;  // (child, is_stderr) of each fd
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].out_fd >= 0) {
      fds.push_back({children_[i].out_fd, POLLIN, 0});
      owners.push_back({static_cast<int>(i), false});
    }
    if (children_[i].err_fd >= 0) {
      fds.push_back({children_[i].err_fd, POLLIN, 0});
      owners.push_back({static_cast<int>(i), true});
    }
  }
  poll(fds.data(), fds.size(), 100);
  for (size_t k = 0; k < fds.size(); ++k) {
    if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    auto [index, is_stderr] = owners[k];
    Child& c = children_[index];
    int& fd = is_stderr ? c.err_fd : c.out_fd;
    char chunk[4096];
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      (is_stderr ? c.err_buffer : c.out_buffer).append(chunk, n);
      Drain(index, is_stderr, on_line, false);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      Drain(index, is_stderr, on_line, true);
      close(fd);
      fd = -1;
    }
  }
}

void ProcessGroup::ReapExited(absl::Duration grace, const LineCallback& on_line,
                              StopSchedule* stop) {
  for (Child& c : children_) {
    if (!c.running) continue;
    int status = 0;
    struct rusage usage = {};
    if (wait4(c.pid, &status, WNOHANG, &usage) != c.pid) continue;
    c.running = false;
    c.exit.peak_resident_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB
    if (WIFEXITED(status)) {
      c.exit.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      c.exit.signal = WTERMSIG(status);
    }
    if (c.exit.exit_code == 0 && c.exit.signal == 0) continue;
    const int index = static_cast<int>(&c - children_.data());
    if (!stop->term_sent && should_restart_ && should_restart_(c.exit)) {
      kill(-c.pid, SIGKILL);  // whatever it started goes with it
      DrainToEnd(index, on_line);
      if (restart_delay_ > absl::ZeroDuration()) {
        c.restart_pending = true;
        c.restart_at = absl::Now() + restart_delay_;
        continue;
      }
      if (Respawn(index, on_line)) continue;
    }
    stop->StopAt(absl::Now() + grace);
  }
}

void ProcessGroup::RunDueRestarts(absl::Duration grace, const LineCallback& on_line,
                                  StopSchedule* stop) {
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (!c.restart_pending || (!stop->term_sent && absl::Now() < c.restart_at)) continue;
    c.restart_pending = false;
    // Stopping the group cancels a restart still to come.
    if (stop->term_sent || !Respawn(static_cast<int>(i), on_line)) {
      stop->StopAt(absl::Now() + grace);
    }
  }
}

std::vector<ProcessGroup::Exit> ProcessGroup::Wait(absl::Duration timeout, absl::Duration grace,
                                                   const LineCallback& on_line,
                                                   const std::function<bool()>& interrupted) {
  const absl::Time deadline = absl::Now() + timeout;
  StopSchedule stop;
  absl::Time all_exited_at = absl::InfiniteFuture();
  while (true) {
    const bool any_running = AnyRunning();
    if (!any_running && !AnyOutputOpen()) break;
    // Every child has exited but something it started still holds its output open:
    // stop it, read what is left, and stop waiting.
    if (!any_running) {
      if (all_exited_at == absl::InfiniteFuture()) all_exited_at = absl::Now();
      if (absl::Now() - all_exited_at > absl::Seconds(2)) {
        KillAndDrainEverything(on_line);
        break;
      }
    }
    ReadOutputs(on_line);
    ReapExited(grace, on_line, &stop);
    RunDueRestarts(grace, on_line, &stop);
    const absl::Time now = absl::Now();
    if (now >= deadline) stop.StopAt(now);
    if (interrupted && interrupted()) stop.StopAt(now);
    stop.Tick(now, this);
  }
  std::vector<Exit> exits;
  for (const Child& c : children_) exits.push_back(c.exit);
  return exits;
}

}  // namespace pstrain
