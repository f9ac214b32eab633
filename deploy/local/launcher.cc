// launcher: starts a pstrain cluster on loopback (what ./demo.sh runs) and watches it as
// an orchestrator would: every task in its own process, configured only by TF_CONFIG;
// the chief's epoch lines on stdout; each task's log in a file; exit 0 only when every
// process has exited cleanly.

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/daemon/command_line.h"
#include "common/daemon/exit_codes.h"
#include "common/daemon/shutdown_signal.h"
#include "common/daemon/signals.h"
#include "common/logging.h"
#include "common/memory_budget.h"
#include "common/training/epoch_summary.h"
#include "common/training/strategy_kind.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, strategy, "parameter_server",
          "parameter_server (a cluster of processes), default (one process, no cluster), "
          "mirrored (one process, one replica per --devices entry) or multi_worker_mirrored "
          "(--workers processes training synchronously with a ring all-reduce)");
ABSL_FLAG(std::string, devices, "",
          "mirrored: cpu:0,cpu:1 or cuda:0,cuda:1 (default: every GPU, else one CPU replica)");
ABSL_FLAG(std::string, collective_timeout, "",
          "multi_worker_mirrored: how long a silent worker is waited for (default: train's)");
ABSL_FLAG(std::string, job, "examples/fashion_mnist.json",
          "Job spec (JSON); examples/seed_synthetic.json is the seed's random data");
ABSL_FLAG(int, epochs, 0, "Overrides fit.epochs of the job when > 0");
ABSL_FLAG(int, staleness, -1,
          "parameter_server: bounded staleness, no worker more than N steps ahead of the "
          "slowest (default: the job's mode, async unless it says otherwise)");
ABSL_FLAG(bool, sync, false,
          "parameter_server: synchronous updates (each ps applies the mean of every "
          "worker's gradient once per step, as TensorFlow's SyncReplicasOptimizer)");
ABSL_FLAG(int, workers, 2, "Worker processes");
ABSL_FLAG(int, ps, 2, "Parameter-server processes");
ABSL_FLAG(std::string, device, "auto",
          "Where workers compute: cpu, auto (a CUDA GPU when one answers, else the CPU), "
          "cuda, cuda:N");
ABSL_FLAG(std::string, bin_dir, "",
          "Folder with ps_server/, worker/ and chief/ binaries (default: next to this one)");
ABSL_FLAG(std::string, log_dir, "", "Where each task's log goes (default: a new temp folder)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "where the chief (parameter_server) or the training process (worker 0 for "
          "multi_worker_mirrored) keeps a checkpoint per epoch (default: a new temp folder); "
          "an existing one with checkpoints resumes from the latest");
ABSL_FLAG(int64_t, checkpoint_every_steps, 0,
          "parameter_server: the chief also checkpoints every this many global steps "
          "(0 = at epoch ends only)");
ABSL_FLAG(bool, verbose, false, "Also echo every task's log lines");
ABSL_FLAG(bool, metrics, true,
          "Every task serves Prometheus metrics on a free port of its own (printed at start); "
          "the chief (train, worker 0) also the live dashboard at /");
ABSL_FLAG(std::string, logdir, "",
          "TensorBoard event files of the run (default: tensorboard/ in the log folder)");
ABSL_FLAG(bool, no_restart, false,
          "parameter_server: do not restart a ps or worker that dies (by default the launcher "
          "restarts it with the same TF_CONFIG, up to 3 times, as an orchestrator would)");
ABSL_FLAG(absl::Duration, timeout, absl::Hours(1), "Stop every task after this long");
ABSL_FLAG(bool, tls, false,
          "Mutual TLS on every channel: the launcher makes a cluster CA and a certificate per "
          "task (tools/make_certs.sh) in tls/ of the log folder and gives each task --tls_dir");
ABSL_FLAG(bool, insecure, false,
          "Run the cluster without authorization (by default the launcher makes a random auth "
          "token for the run, which every task and psctl must send)");
ABSL_FLAG(absl::Duration, grace, absl::Seconds(15),
          "After a task fails, how long the others get to stop by themselves");

namespace {

using ::pstrain::ParseStrategyKind;
using ::pstrain::StrategyKind;
using ::pstrain::StrategyKindName;

// bazel-bin/deploy/local/launcher -> bazel-bin.
std::string DefaultBinDir() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "bazel-bin";
  std::string path(exe, n);
  for (int i = 0; i < 3; ++i) path = path.substr(0, path.rfind('/'));
  return path;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "launcher: %s\n", message.c_str());
  return 2;
}

// tools/make_certs.sh: in this binary's runfiles, else from the current folder (./demo.sh
// runs in the repository).
std::string MakeCertsScript() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    const std::string in_runfiles =
        std::string(exe, n) + ".runfiles/pstrain/tools/make_certs.sh";
    if (access(in_runfiles.c_str(), X_OK) == 0) return in_runfiles;
  }
  return "tools/make_certs.sh";
}

// Makes `dir`/ca.crt and a certificate for each of `names` (and admin, for psctl), each
// valid for localhost. Errors: INTERNAL naming the script's failure.
absl::Status MakeClusterCertificates(const std::string& dir, const std::vector<std::string>& names) {
  std::vector<std::string> args = {MakeCertsScript(), dir};
  for (const std::string& name : names) args.push_back(name + "=localhost,127.0.0.1,::1");
  args.push_back("admin");
  pstrain::ProcessGroup group;
  absl::Status started = group.Start({"make_certs", "/bin/bash", args, {}});
  if (!started.ok()) return started;
  std::string output;
  const std::vector<pstrain::ProcessGroup::Exit> exits = group.Wait(
      absl::Minutes(1), absl::Seconds(1),
      [&output](int, const std::string&, bool, const std::string& line) { output += line + "\n"; },
      [] { return false; });
  if (exits.size() != 1 || exits[0].exit_code != 0) {
    return absl::InternalError(absl::StrCat("tools/make_certs.sh failed: ", output));
  }
  return absl::OkStatus();
}

// A fresh random token for this run (256 bits from the kernel, as hex), written to
// `path` readable by the user only, so psctl can send it (--auth_token_file). "" when
// the kernel gives no randomness or the file cannot be written.
std::string MakeAuthTokenFile(const std::string& path) {
  unsigned char bytes[32];
  FILE* random = std::fopen("/dev/urandom", "rb");
  const bool read = random != nullptr && std::fread(bytes, 1, sizeof(bytes), random) == sizeof(bytes);
  if (random != nullptr) std::fclose(random);
  if (!read) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return "";
  const std::string line = token + "\n";
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  return written ? token : "";
}

// How the launcher runs the job: which processes it starts (the strategy itself is the
// trainers' business; they get the flag as it was given).
enum class LaunchMode {
  kOneProcess,           // default, mirrored: train/train alone, no cluster
  kParameterServer,      // a chief, --ps ps and --workers workers
  kMultiWorkerMirrored,  // --workers train/train processes in a ring, no chief or ps
};

LaunchMode LaunchModeOf(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kDefault:
    case StrategyKind::kMirrored:
      return LaunchMode::kOneProcess;
    case StrategyKind::kMultiWorkerMirrored:
      return LaunchMode::kMultiWorkerMirrored;
    case StrategyKind::kParameterServer:
      break;
  }
  return LaunchMode::kParameterServer;
}

// --max_memory (common/memory_budget.h's flag, parsed and checked as the daemons parse it)
// is the chief's and the workers' under parameter_server: the tasks that should hold no
// more than a batch's share of a large model. The ps hold the model and keep their
// default; the launcher itself plans no memory. Under default and mirrored it is the one
// process's. Given: other than its default (80%, which the tasks have anyway).
bool MaxMemoryGiven() {
  return pstrain::AbslUnparseFlag(absl::GetFlag(FLAGS_max_memory)) !=
         absl::GetFlagReflectionHandle(FLAGS_max_memory).DefaultValue();
}

std::string MaxMemoryFlag() {
  return absl::StrCat("--max_memory=", pstrain::AbslUnparseFlag(absl::GetFlag(FLAGS_max_memory)));
}

// Flags that cannot go together, checked before anything is made or started.
absl::Status CheckFlagCombinations(LaunchMode mode) {
  if (absl::GetFlag(FLAGS_tls) && absl::GetFlag(FLAGS_insecure)) {
    return absl::InvalidArgumentError("--tls and --insecure exclude each other");
  }
  if (mode == LaunchMode::kMultiWorkerMirrored && absl::GetFlag(FLAGS_checkpoint_every_steps) > 0) {
    return absl::InvalidArgumentError(
        "--checkpoint_every_steps is for the parameter_server strategy");
  }
  if (absl::GetFlag(FLAGS_sync) && absl::GetFlag(FLAGS_staleness) >= 0) {
    return absl::InvalidArgumentError("--sync and --staleness exclude each other");
  }
  if (mode == LaunchMode::kMultiWorkerMirrored && MaxMemoryGiven()) {
    return absl::InvalidArgumentError(
        "--max_memory is for the parameter_server strategy and the one-process ones");
  }
  if (mode == LaunchMode::kMultiWorkerMirrored && absl::GetFlag(FLAGS_workers) < 1) {
    return absl::InvalidArgumentError("--workers must be >= 1");
  }
  return absl::OkStatus();
}

// A new folder /tmp/PREFIX-XXXXXX, or "" when none can be made.
std::string FreshTempDir(const char* prefix) {
  std::string pattern = absl::StrCat("/tmp/", prefix, "-XXXXXX");
  return mkdtemp(pattern.data()) == nullptr ? "" : pattern;
}

std::string JobFlag() { return absl::StrCat("--job=", absl::GetFlag(FLAGS_job)); }

// "--epochs=N" when the user overrides the job's epochs, else nothing.
std::vector<std::string> EpochsFlag() {
  if (absl::GetFlag(FLAGS_epochs) <= 0) return {};
  return {absl::StrCat("--epochs=", absl::GetFlag(FLAGS_epochs))};
}

// default and mirrored: TensorFlow's strategies of one process, no cluster. This process
// becomes train/train; returns only when that fails.
int ExecOneProcessTrainer(const std::string& bin_dir, StrategyKind kind) {
  const std::string strategy(StrategyKindName(kind));
  const std::string train = bin_dir + "/train/train";
  std::vector<std::string> args = {train, JobFlag(),
                                   absl::StrCat("--device=", absl::GetFlag(FLAGS_device)),
                                   absl::StrCat("--strategy=", strategy)};
  if (kind == StrategyKind::kMirrored) {
    args.push_back(absl::StrCat("--devices=", absl::GetFlag(FLAGS_devices)));
  }
  for (std::string& epochs : EpochsFlag()) args.push_back(std::move(epochs));
  if (MaxMemoryGiven()) args.push_back(MaxMemoryFlag());
  // Checkpoints per epoch, as the cluster keeps them, so a second run resumes.
  std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (checkpoint_dir.empty() && (checkpoint_dir = FreshTempDir("pstrain-checkpoints")).empty()) {
    return Fail("cannot create a checkpoint folder in /tmp");
  }
  args.push_back(absl::StrCat("--checkpoint_dir=", checkpoint_dir));
  std::string logdir = absl::GetFlag(FLAGS_logdir);
  if (logdir.empty()) logdir = FreshTempDir("pstrain-tensorboard");
  if (!logdir.empty()) args.push_back(absl::StrCat("--logdir=", logdir));
  if (pstrain::GetLogFormat() == pstrain::LogFormat::kJson) args.push_back("--log_format=json");
  std::string watch;
  if (absl::GetFlag(FLAGS_metrics)) {
    absl::StatusOr<std::vector<int>> port = pstrain::PickFreePorts(1);
    if (!port.ok()) return Fail(std::string(port.status().message()));
    args.push_back(absl::StrCat("--metrics_port=", (*port)[0]));
    watch = absl::StrCat("; dashboard http://localhost:", (*port)[0], "/ (metrics at /metrics)");
  }
  std::printf("pstrain: %s strategy, one process; checkpoints in %s; TensorBoard logs in %s%s\n",
              strategy.c_str(), checkpoint_dir.c_str(), logdir.c_str(), watch.c_str());
  std::fflush(stdout);
  std::vector<char*> argv_train;
  for (std::string& a : args) argv_train.push_back(a.data());
  argv_train.push_back(nullptr);
  execv(train.c_str(), argv_train.data());
  return Fail(absl::StrCat("cannot execute ", train));
}

// Where a cluster run keeps its files.
struct RunFolders {
  std::string log_dir;         // each task's log, the auth token, tls/
  std::string checkpoint_dir;  // the chief's (worker 0's) checkpoints
  std::string logdir;          // TensorBoard event files
};

// The folders of --log_dir, --checkpoint_dir and --logdir, new temp ones where not given.
// Errors: INTERNAL naming the folder that cannot be made.
absl::StatusOr<RunFolders> MakeRunFolders() {
  RunFolders folders;
  folders.log_dir = absl::GetFlag(FLAGS_log_dir);
  if (folders.log_dir.empty() && (folders.log_dir = FreshTempDir("pstrain-logs")).empty()) {
    return absl::InternalError("cannot create a log folder in /tmp");
  }
  folders.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (folders.checkpoint_dir.empty() &&
      (folders.checkpoint_dir = FreshTempDir("pstrain-checkpoints")).empty()) {
    return absl::InternalError("cannot create a checkpoint folder in /tmp");
  }
  // A --log_dir that does not exist yet is made (the task logs and the token go there).
  std::error_code made_log_dir;
  std::filesystem::create_directories(folders.log_dir, made_log_dir);
  if (made_log_dir) {
    return absl::InternalError(absl::StrCat("cannot create the log folder ", folders.log_dir,
                                            ": ", made_log_dir.message()));
  }
  folders.logdir = absl::GetFlag(FLAGS_logdir);
  if (folders.logdir.empty()) folders.logdir = folders.log_dir + "/tensorboard";
  return folders;
}

// How the run's tasks prove who they are.
struct RunSecurity {
  std::string tls_dir;  // --tls: the CA and every task's certificate; else ""
  std::string note;     // for the first line: where psctl finds the token or certificates
};

// Mutual TLS (--tls): a CA and a certificate per task in the log folder, read by every
// task (--tls_dir) and by psctl (admin.crt). Authorization: one random token per run,
// which every task inherits through its environment (a token the user exported already
// is kept), or none with --insecure. Errors: INTERNAL when certificates or the token
// cannot be made.
absl::StatusOr<RunSecurity> SetUpSecurity(const RunFolders& folders, LaunchMode mode) {
  RunSecurity security;
  const bool chief_and_ps = mode == LaunchMode::kParameterServer;
  if (absl::GetFlag(FLAGS_tls)) {
    security.tls_dir = folders.log_dir + "/tls";
    std::vector<std::string> names;
    if (chief_and_ps) names.push_back("chief-0");
    for (int i = 0; chief_and_ps && i < absl::GetFlag(FLAGS_ps); ++i) {
      names.push_back(absl::StrCat("ps-", i));
    }
    for (int i = 0; i < absl::GetFlag(FLAGS_workers); ++i) {
      names.push_back(absl::StrCat("worker-", i));
    }
    if (absl::Status made = MakeClusterCertificates(security.tls_dir, names); !made.ok()) {
      return made;
    }
  }
  if (absl::GetFlag(FLAGS_insecure)) {
    unsetenv("PSTRAIN_AUTH_TOKEN");
  } else if (const char* own = getenv("PSTRAIN_AUTH_TOKEN"); own == nullptr || *own == '\0') {
    const std::string token_file = folders.log_dir + "/auth_token";
    const std::string token = MakeAuthTokenFile(token_file);
    if (token.empty()) {
      return absl::InternalError(absl::StrCat("cannot write an auth token to ", token_file));
    }
    setenv("PSTRAIN_AUTH_TOKEN", token.c_str(), 1);
    security.note = absl::StrCat("; auth token in ", token_file, " (psctl --auth_token_file=",
                                 token_file, ")");
  }
  if (!security.tls_dir.empty()) {
    security.note = absl::StrCat("; mutual TLS, certificates in ", security.tls_dir,
                                 " (psctl --tls_dir=", security.tls_dir, ")");
  }
  return security;
}

// Flags every task of the run gets.
std::vector<std::string> TaskArgs(const RunSecurity& security) {
  std::vector<std::string> args;
  if (pstrain::GetLogFormat() == pstrain::LogFormat::kJson) args.push_back("--log_format=json");
  if (absl::GetFlag(FLAGS_insecure)) args.push_back("--insecure");
  if (!security.tls_dir.empty()) args.push_back(absl::StrCat("--tls_dir=", security.tls_dir));
  return args;
}

// The parameter-server cluster's options from the flags: the chief runs the job, keeps
// the checkpoints and TensorBoard files, and sets the consistency mode.
pstrain::LocalClusterOptions ParameterServerOptions(const std::string& bin_dir,
                                                    const RunFolders& folders,
                                                    const RunSecurity& security) {
  pstrain::LocalClusterOptions options;
  options.bin_dir = bin_dir;
  options.num_ps = absl::GetFlag(FLAGS_ps);
  options.num_workers = absl::GetFlag(FLAGS_workers);
  options.chief_args = {JobFlag(), absl::StrCat("--checkpoint_dir=", folders.checkpoint_dir),
                        absl::StrCat("--logdir=", folders.logdir)};
  options.worker_args = {absl::StrCat("--device=", absl::GetFlag(FLAGS_device))};
  // The ps write and restore their own shards of every checkpoint in the same folder.
  options.ps_args = {absl::StrCat("--checkpoint_dir=", folders.checkpoint_dir)};
  options.task_args = TaskArgs(security);
  if (absl::GetFlag(FLAGS_checkpoint_every_steps) > 0) {
    options.chief_args.push_back(absl::StrCat("--checkpoint_every_steps=",
                                              absl::GetFlag(FLAGS_checkpoint_every_steps)));
  }
  for (std::string& epochs : EpochsFlag()) options.chief_args.push_back(std::move(epochs));
  if (MaxMemoryGiven()) {
    options.chief_args.push_back(MaxMemoryFlag());
    options.worker_args.push_back(MaxMemoryFlag());
  }
  if (absl::GetFlag(FLAGS_sync)) options.chief_args.push_back("--consistency=sync");
  if (absl::GetFlag(FLAGS_staleness) >= 0) {
    options.chief_args.push_back("--consistency=bounded_staleness");
    options.chief_args.push_back(absl::StrCat("--staleness=", absl::GetFlag(FLAGS_staleness)));
  }
  return options;
}

// multi_worker_mirrored: worker processes only (TF_CONFIG with worker entries), each
// train/train serving the all-reduce on its own port, started in `group`; their metrics
// ports are recorded in `metrics_ports` with --metrics. Errors: UNAVAILABLE no free
// port; INTERNAL a process that cannot be started.
absl::Status StartMultiWorkerMirrored(const std::string& bin_dir, const RunFolders& folders,
                                      const RunSecurity& security, pstrain::ProcessGroup* group,
                                      std::map<std::string, int>* metrics_ports) {
  const int num_workers = absl::GetFlag(FLAGS_workers);
  absl::StatusOr<std::vector<int>> ports = pstrain::PickFreePorts(num_workers);
  if (!ports.ok()) return ports.status();
  absl::StatusOr<std::vector<int>> metrics = pstrain::PickFreePorts(num_workers);
  if (!metrics.ok()) return metrics.status();
  std::vector<std::string> addresses;
  for (int port : *ports) addresses.push_back(absl::StrCat("localhost:", port));
  const std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"worker", addresses}};
  for (int i = 0; i < num_workers; ++i) {
    std::vector<std::string> args = {JobFlag(),
                                     absl::StrCat("--device=", absl::GetFlag(FLAGS_device)),
                                     "--strategy=multi_worker_mirrored",
                                     // Worker 0 writes and restores; it sends the
                                     // restored state to the others.
                                     absl::StrCat("--checkpoint_dir=", folders.checkpoint_dir)};
    for (std::string& epochs : EpochsFlag()) args.push_back(std::move(epochs));
    if (i == 0) args.push_back(absl::StrCat("--logdir=", folders.logdir));
    if (absl::GetFlag(FLAGS_metrics)) {
      (*metrics_ports)[absl::StrCat("worker", i)] = (*metrics)[i];
      args.push_back(absl::StrCat("--metrics_port=", (*metrics)[i]));
    }
    for (std::string& arg : TaskArgs(security)) args.push_back(std::move(arg));
    if (!absl::GetFlag(FLAGS_collective_timeout).empty()) {
      args.push_back(absl::StrCat("--collective_timeout=", absl::GetFlag(FLAGS_collective_timeout)));
    }
    absl::Status started = group->Start(
        {absl::StrCat("worker", i), bin_dir + "/train/train", args,
         {{"TF_CONFIG", pstrain::MakeTfConfig(cluster, "worker", i)},
          // Several processes share the cores: one BLAS thread each.
          {"OPENBLAS_NUM_THREADS", "1"}}});
    if (!started.ok()) return started;
  }
  return absl::OkStatus();
}

// The first line: what runs, and where its files are.
void PrintRunLine(LaunchMode mode, const RunFolders& folders, const RunSecurity& security) {
  const std::string strategy = absl::GetFlag(FLAGS_strategy);
  if (mode == LaunchMode::kMultiWorkerMirrored) {
    std::printf("pstrain: %s strategy, %d workers on loopback; logs in %s; checkpoints in %s%s\n",
                strategy.c_str(), absl::GetFlag(FLAGS_workers), folders.log_dir.c_str(),
                folders.checkpoint_dir.c_str(), security.note.c_str());
  } else {
    std::printf(
        "pstrain: %s strategy, 1 chief, %d ps, %d workers on loopback; logs in %s; "
        "checkpoints in %s%s\n",
        strategy.c_str(), absl::GetFlag(FLAGS_ps), absl::GetFlag(FLAGS_workers),
        folders.log_dir.c_str(), folders.checkpoint_dir.c_str(), security.note.c_str());
  }
  std::fflush(stdout);
}

// The second line: where to watch (before any epoch line).
void PrintWatchLine(const std::map<std::string, int>& metrics_ports, const std::string& reporter,
                    const std::string& logdir) {
  if (metrics_ports.empty()) return;
  std::string ports;
  // By name: chief, ps0, ps1, ..., worker0, ...
  for (const auto& [name, port] : metrics_ports) absl::StrAppend(&ports, " ", name, " ", port);
  const auto reporter_port = metrics_ports.find(reporter);
  std::printf("pstrain: dashboard http://localhost:%d/ ; Prometheus metrics at "
              "http://localhost:PORT/metrics,%s; TensorBoard logs in %s\n",
              reporter_port == metrics_ports.end() ? 0 : reporter_port->second, ports.c_str(),
              logdir.c_str());
  std::fflush(stdout);
}

// The run's terminal output: the reporter's stdout (the epoch lines) on stdout, every
// task's output in its log file, warnings and errors (all lines with --verbose) on
// stderr, and on a terminal Keras' progress bar of the epoch in progress, read from the
// reporter's dashboard data (its own stderr is a pipe here) and cleared before each line.
// OnLine is called from the process group's thread; the bar has a thread of its own.
class RunOutput {
 public:
  RunOutput(std::string reporter, std::string log_dir, bool verbose)
      : reporter_(std::move(reporter)), log_dir_(std::move(log_dir)), verbose_(verbose) {}
  ~RunOutput() { StopProgressBar(); }

  // Draws the bar from the dashboard on `port` until StopProgressBar.
  void StartProgressBar(int port) {
    bar_ = std::thread([this, port] {
      httplib::Client client("127.0.0.1", port);
      client.set_connection_timeout(1, 0);
      client.set_read_timeout(1, 0);
      while (!bar_done_.WaitFor(absl::Milliseconds(250))) {
        httplib::Result answer = client.Get("/api/dashboard");
        if (!answer || answer->status != 200) continue;
        const nlohmann::json data = nlohmann::json::parse(answer->body, nullptr, false);
        if (!data.is_object() || !data.contains("progress") || data["progress"].empty()) continue;
        const nlohmann::json& p = data["progress"];
        const int64_t step = p.value("epoch_step", int64_t{0});
        const int64_t steps = p.value("epoch_steps", int64_t{0});
        if (steps <= 0 || step >= steps) continue;  // unknown length, or the epoch's end
        const std::string line = pstrain::FormatProgressBar(
            step, steps, absl::Seconds(p.value("elapsed_seconds", 0.0)), p.value("loss", 0.0),
            p.value("accuracy", 0.0));
        absl::MutexLock lock(&mu_);
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
        std::fflush(stderr);
        bar_drawn_ = true;
      }
    });
  }

  // Stops the bar's thread and clears the bar.
  void StopProgressBar() ABSL_LOCKS_EXCLUDED(mu_) {
    if (!bar_done_.requested()) bar_done_.Request(0, "the cluster is done");
    if (bar_.joinable()) bar_.join();
    absl::MutexLock lock(&mu_);
    ClearBar();
  }

  void OnLine(const std::string& name, bool is_stderr, const std::string& line)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!is_stderr && name == reporter_) {
      ClearBar();
      std::cout << line << std::endl;
      return;
    }
    auto& log = logs_[name];
    if (log == nullptr) log = std::make_unique<std::ofstream>(log_dir_ + "/" + name + ".log");
    *log << line << '\n';
    log->flush();
    // Errors always reach the user; the rest only with --verbose.
    if (verbose_ || pstrain::LogRecordLevel(line) != 'I') {
      ClearBar();
      std::cerr << "[" << name << "] " << line << std::endl;
    }
  }

 private:
  void ClearBar() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (bar_drawn_) std::fprintf(stderr, "\r\033[K");
    bar_drawn_ = false;
  }

  const std::string reporter_;
  const std::string log_dir_;
  const bool verbose_;
  pstrain::ShutdownSignal bar_done_;
  std::thread bar_;

  absl::Mutex mu_;
  bool bar_drawn_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::unique_ptr<std::ofstream>> logs_ ABSL_GUARDED_BY(mu_);
};

// Says how each process that did not exit cleanly ended; the launcher's exit code.
int ReportExits(const std::vector<pstrain::ProcessGroup::Exit>& exits, bool interrupted,
                const RunFolders& folders) {
  int failures = 0;
  for (const auto& exit : exits) {
    if (exit.exit_code == pstrain::kExitPreempted && interrupted) {
      // Stopped mid-training by the interrupt: its checkpoint is where a next run resumes.
      ++failures;
      std::fprintf(stderr,
                   "launcher: %s stopped for a restart after a checkpoint (exit %d); run again "
                   "with --checkpoint_dir=%s to resume\n",
                   exit.name.c_str(), exit.exit_code, folders.checkpoint_dir.c_str());
    } else if (exit.exit_code != 0 || exit.signal != 0) {
      ++failures;
      std::fprintf(stderr, "launcher: %s %s (log: %s/%s.log)\n", exit.name.c_str(),
                   pstrain::DescribeExit(exit).c_str(), folders.log_dir.c_str(),
                   exit.name.c_str());
    }
  }
  if (failures == 0) {
    std::printf("pstrain: all %zu processes exited cleanly\n", exits.size());
    return 0;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(argc, argv,
      "Runs a pstrain cluster on this machine: 1 chief, --ps ps and --workers workers.");
  if (access(absl::GetFlag(FLAGS_job).c_str(), R_OK) != 0) {
    return Fail(absl::StrCat("cannot read job spec ", absl::GetFlag(FLAGS_job)));
  }
  const absl::StatusOr<StrategyKind> kind = ParseStrategyKind(absl::GetFlag(FLAGS_strategy));
  if (!kind.ok()) return Fail(absl::StrCat("--strategy: ", kind.status().message()));
  const LaunchMode mode = LaunchModeOf(*kind);
  const std::string bin_dir = absl::GetFlag(FLAGS_bin_dir).empty() ? DefaultBinDir()
                                                                   : absl::GetFlag(FLAGS_bin_dir);
  if (mode == LaunchMode::kOneProcess) return ExecOneProcessTrainer(bin_dir, *kind);
  if (absl::Status checked = CheckFlagCombinations(mode); !checked.ok()) {
    return Fail(std::string(checked.message()));
  }

  const absl::StatusOr<RunFolders> folders = MakeRunFolders();
  if (!folders.ok()) return Fail(std::string(folders.status().message()));
  const absl::StatusOr<RunSecurity> security = SetUpSecurity(*folders, mode);
  if (!security.ok()) return Fail(std::string(security.status().message()));

  // Ctrl-C (or SIGTERM) stops every task: SIGTERM to each, SIGKILL 5 s later (the chief
  // checkpoints on the way out); a second Ctrl-C leaves at once, and the tasks die with
  // the launcher. (Never freed: the signal thread may use it until the process ends.)
  pstrain::ShutdownSignal& interrupted = *new pstrain::ShutdownSignal();
  pstrain::StartSignalThread(absl::Seconds(30), [&interrupted](const char* signal_name) {
    interrupted.Request(130, signal_name);
    return 130;
  });

  PrintRunLine(mode, *folders, *security);
  pstrain::ProcessGroup group;
  std::map<std::string, int> metrics_ports;
  // Whose stdout is the job's output: the chief's, or worker 0's in a chief-less cluster.
  std::string reporter;
  if (mode == LaunchMode::kMultiWorkerMirrored) {
    reporter = "worker0";
    if (absl::Status started =
            StartMultiWorkerMirrored(bin_dir, *folders, *security, &group, &metrics_ports);
        !started.ok()) {
      return Fail(std::string(started.message()));
    }
  } else {
    reporter = "chief";
    // The chief gives a returning worker work again from the next epoch.
    if (!absl::GetFlag(FLAGS_no_restart)) group.SetRestartPolicy(pstrain::RestartLikeAnOrchestrator);
    pstrain::LocalClusterOptions options = ParameterServerOptions(bin_dir, *folders, *security);
    if (absl::GetFlag(FLAGS_metrics)) options.metrics_ports = &metrics_ports;
    if (absl::Status started = pstrain::StartLocalCluster(options, &group); !started.ok()) {
      return Fail(std::string(started.message()));
    }
  }
  PrintWatchLine(metrics_ports, reporter, folders->logdir);

  RunOutput output(reporter, folders->log_dir, absl::GetFlag(FLAGS_verbose));
  if (isatty(STDERR_FILENO) == 1 && metrics_ports.count(reporter) != 0) {
    output.StartProgressBar(metrics_ports[reporter]);
  }
  const std::vector<pstrain::ProcessGroup::Exit> exits = group.Wait(
      absl::GetFlag(FLAGS_timeout), absl::GetFlag(FLAGS_grace),
      [&output](int, const std::string& name, bool is_stderr, const std::string& line) {
        output.OnLine(name, is_stderr, line);
      },
      [&] { return interrupted.requested(); });
  output.StopProgressBar();
  return ReportExits(exits, interrupted.requested(), *folders);
}
