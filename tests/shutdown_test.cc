// SIGTERM to a chief, a worker and a ps of a training cluster, as an orchestrator sends it
// (a node drained, a pod evicted), each a real process with OpenBLAS running two threads
// of real sgemm work: mid-epoch and during a checkpoint write. (Waiting for tasks:
// tests/daemon_process_test.cc.)
//
// The chief stops handing out work, writes a checkpoint and exits 42 by itself within the
// grace; the ps's values are then exactly the checkpoint's (no update is lost); a
// restarted chief re-attaches the live tasks and resumes from that checkpoint. A worker
// and a ps exit 0, by themselves, within the grace.

#include <signal.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_server/rpc/grpc_ps_client.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

constexpr char kGrace[] = "--shutdown_grace=15s";

// The tiny job with 32000 samples, so that an epoch is many chunks long.
std::string WriteLongerJob(const std::string& dir) {
  std::ifstream in("tests/testdata/tiny_synthetic.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string job = text.str();
  const std::string from = "\"samples\": 400";
  const size_t at = job.find(from);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) job.replace(at, from.size(), "\"samples\": 32000");
  const std::string path = dir + "/job.json";
  std::ofstream(path) << job;
  return path;
}

// SIGTERM sent to `victim` of `group` (null: the chief itself) on the first line of the
// chief that contains `text` (its log, or its stdout), once the triggers before it have
// fired.
struct Trigger {
  bool in_log;
  std::string text;
  ProcessGroup* group;
  std::string victim;
  bool fired = false;
};

struct ChiefRun {
  ProcessGroup::Exit exit;
  std::string out;
  std::string log;
};

// 1 chief, 1 ps and 2 workers on 127.0.0.1; the ps and workers in one group, each
// incarnation of the chief in a group of its own, so that the test can look at the ps
// between two chiefs.
class TrainingCluster {
 public:
  explicit TrainingCluster(const std::string& name) : dir_(FreshTestDir(name)) {
    job_ = WriteLongerJob(dir_);
    absl::StatusOr<std::vector<int>> ports = PickFreePorts(4);
    EXPECT_TRUE(ports.ok()) << ports.status();
    std::vector<std::string> a;
    for (int i = 0; i < 4; ++i) {
      a.push_back(absl::StrCat("127.0.0.1:", ports.ok() ? (*ports)[i] : 0));
    }
    spec_ = {{"chief", {a[0]}}, {"ps", {a[1]}}, {"worker", {a[2], a[3]}}};
    ps_address_ = a[1];
    const std::vector<std::string> task_args = {kGrace, "--chief_timeout=60s",
                                                "--heartbeat_interval=200ms"};
    EXPECT_TRUE(tasks_.Start(Spec("ps0", "ps_server/ps_server", "ps", 0, task_args)).ok());
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> args = task_args;
      args.push_back("--device=cpu");
      EXPECT_TRUE(
          tasks_.Start(Spec(absl::StrCat("worker", i), "worker/worker", "worker", i, args)).ok());
    }
  }

  ProcessGroup& tasks() { return tasks_; }
  const std::string& checkpoint_dir() const { return dir_; }
  const std::string& ps_address() const { return ps_address_; }

  // Runs one chief until it exits, firing `triggers` in order on its lines.
  ChiefRun RunChief(const std::vector<std::string>& extra_args, std::vector<Trigger>* triggers) {
    std::vector<std::string> args = {absl::StrCat("--job=", job_),
                                     "--epochs=30",
                                     "--steps_per_call=4",
                                     absl::StrCat("--checkpoint_dir=", dir_),
                                     "--keep_checkpoints=50",
                                     "--ps_recovery_timeout=2s",
                                     kGrace};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    ProcessGroup chief;
    EXPECT_TRUE(chief.Start(Spec("chief", "chief/chief", "chief", 0, args)).ok());
    ChiefRun run;
    const std::vector<ProcessGroup::Exit> exits = chief.Wait(
        ScaledForSanitizers(absl::Minutes(3)), absl::Seconds(10),
        [&](int, const std::string& name, bool is_stderr, const std::string& line) {
          (is_stderr ? run.log : run.out) += line + "\n";
          for (Trigger& t : *triggers) {
            if (t.fired) continue;
            if (t.in_log == is_stderr && absl::StrContains(line, t.text)) {
              t.fired = true;
              ProcessGroup* group = t.group != nullptr ? t.group : &chief;
              EXPECT_TRUE(group->Signal(t.victim, SIGTERM).ok()) << t.victim;
            }
            break;  // in order: a later trigger waits for this one
          }
        },
        nullptr);
    EXPECT_EQ(exits.size(), 1u);
    if (!exits.empty()) run.exit = exits[0];
    for (const Trigger& t : *triggers) EXPECT_TRUE(t.fired) << t.text << "\n" << run.log;
    return run;
  }

  // Waits for the ps and workers to exit.
  ProcessRun WaitForTasks() { return CollectRun(tasks_, absl::Minutes(2), absl::Seconds(30)); }

 private:
  ProcessGroup::Spec Spec(const std::string& name, const std::string& binary,
                          const std::string& type, int index, std::vector<std::string> args) {
    return {name, binary, std::move(args),
            {{"TF_CONFIG", MakeTfConfig(spec_, type, index)},
             // Two BLAS threads (the second started when OpenBLAS loads) doing real sgemm
             // work: a signal must not reach that thread.
             {"OPENBLAS_NUM_THREADS", "2"}}};
  }

  const std::string dir_;
  std::string job_;
  std::vector<std::pair<std::string, std::vector<std::string>>> spec_;
  std::string ps_address_;
  ProcessGroup tasks_;
};

// The text after `marker` up to the next space, "(", "," or ";".
std::string WordAfter(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  return text.substr(begin, text.find_first_of(" (,;\n", begin) - begin);
}

// A daemon that stopped by itself, not ended by the grace or a signal.
void ExpectStoppedByItself(const ProcessGroup::Exit& exit, const std::string& log,
                           int expected_code) {
  EXPECT_EQ(exit.signal, 0) << exit.name << " " << DescribeExit(exit) << "\n" << log;
  EXPECT_EQ(exit.exit_code, expected_code) << exit.name << " " << DescribeExit(exit) << "\n"
                                           << log;
  EXPECT_TRUE(absl::StrContains(log, "SIGTERM received")) << exit.name << "\n" << log;
  EXPECT_FALSE(absl::StrContains(log, "did not shut down within")) << exit.name << "\n" << log;
}

// The chief preempted: exit 42 by itself, after a checkpoint of the very step it stopped
// at; the ps then holds exactly that checkpoint's values and counts. Returns its path.
std::string ExpectPreemptedWithNothingLost(const ChiefRun& run, const std::string& ps_address) {
  ExpectStoppedByItself(run.exit, run.log, 42);
  const std::string step = WordAfter(run.log, "stopped for a restart: preempted at step ");
  const std::string path = WordAfter(run.log, "the newest checkpoint is ");
  EXPECT_FALSE(step.empty()) << run.log;
  EXPECT_TRUE(absl::EndsWith(path, absl::StrCat("/ckpt-", step))) << path << "\n" << run.log;
  EXPECT_TRUE(absl::StrContains(run.log, absl::StrCat("checkpoint ", path, " written")))
      << run.log;

  absl::StatusOr<std::unique_ptr<CheckpointReader>> checkpoint = CheckpointReader::Open(path);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  if (!checkpoint.ok()) return path;
  std::unique_ptr<PsClient> ps = CreateGrpcPsClient(0, ps_address, absl::Seconds(10));
  absl::StatusOr<std::vector<VariableSnapshot>> state = ps->ReadState({});
  EXPECT_TRUE(state.ok()) << state.status();
  if (!state.ok()) return path;
  EXPECT_FALSE(state->empty());
  const nlohmann::json& variables = (*checkpoint)->metadata()["variables"];
  for (const VariableSnapshot& s : *state) {
    absl::StatusOr<const Tensor*> saved = (*checkpoint)->Get(s.name);
    EXPECT_TRUE(saved.ok()) << s.name;
    if (!saved.ok()) continue;
    EXPECT_EQ((*saved)->shape(), s.value.shape()) << s.name;
    if ((*saved)->shape() != s.value.shape()) continue;
    EXPECT_EQ(std::memcmp((*saved)->data(), s.value.data(), s.value.num_elements() * sizeof(float)),
              0)
        << s.name << ": the ps moved on after the checkpoint";
    EXPECT_EQ(variables[s.name]["iterations"].get<int64_t>(), s.iterations) << s.name;
    EXPECT_EQ(variables[s.name]["version"].get<int64_t>(), s.version) << s.name;
  }
  return path;
}

// A restarted chief re-attached the live tasks and went on from `path`.
void ExpectResumedFrom(const ChiefRun& run, const std::string& path) {
  EXPECT_TRUE(absl::StrContains(run.log, absl::StrCat("restored ", path, " ("))) << run.log;
  EXPECT_TRUE(absl::StrContains(run.log, "continuing with epoch")) << run.log;
  EXPECT_TRUE(absl::StrContains(run.out, "Epoch ")) << run.log;
}

// The ps and the worker stopped by SIGTERM exit 0 by themselves; the other worker was
// told to stop by the chief, whose job failed once the ps did not come back.
void ExpectTasksStopped(TrainingCluster& cluster, const ChiefRun& last_chief) {
  EXPECT_EQ(last_chief.exit.exit_code, 1) << last_chief.log;
  EXPECT_TRUE(absl::StrContains(last_chief.log, "did not come back")) << last_chief.log;
  ProcessRun tasks = cluster.WaitForTasks();
  for (const ProcessGroup::Exit& exit : tasks.exits) {
    const std::string& log = tasks.stderr_of[exit.name];
    if (exit.name == "worker0") {
      EXPECT_EQ(exit.exit_code, 0) << DescribeExit(exit) << "\n" << log;
    } else {
      ExpectStoppedByItself(exit, log, 0);
    }
  }
}

// Mid-epoch: with no checkpoint at epoch ends, a signal sent as an epoch line appears
// lands inside the next epoch (tens of chunks long).
TEST(ShutdownTest, SigtermMidEpoch) {
  TrainingCluster cluster("mid_epoch");
  std::vector<Trigger> preempt = {{false, "Epoch 2/", nullptr, "chief"}};
  ChiefRun first = cluster.RunChief({"--checkpoint_every_epoch=false"}, &preempt);
  const std::string path = ExpectPreemptedWithNothingLost(first, cluster.ps_address());

  std::vector<Trigger> stop_tasks = {
      {false, "Epoch 4/", &cluster.tasks(), "worker1"},
      {false, "Epoch 6/", &cluster.tasks(), "ps0"},
  };
  ChiefRun second = cluster.RunChief({"--checkpoint_every_epoch=false"}, &stop_tasks);
  ExpectResumedFrom(second, path);
  ExpectTasksStopped(cluster, second);
}

// During a checkpoint write: each epoch-end checkpoint takes 3 s between reading the ps
// and committing its files; the signals come as it starts.
TEST(ShutdownTest, SigtermDuringACheckpointWrite) {
  TrainingCluster cluster("checkpoint_write");
  const std::vector<std::string> slow_writes = {"--testing_checkpoint_commit_delay=3s"};
  std::vector<Trigger> preempt = {{true, "writing checkpoint", nullptr, "chief"}};
  ChiefRun first = cluster.RunChief(slow_writes, &preempt);
  // The write under way is the one a restart resumes from: nothing was trained after it.
  const std::string path = ExpectPreemptedWithNothingLost(first, cluster.ps_address());
  EXPECT_EQ(first.log.find("writing checkpoint"), first.log.rfind("writing checkpoint"))
      << "one write, not a second one on the way out\n" << first.log;

  std::vector<Trigger> stop_tasks = {
      {true, "writing checkpoint", &cluster.tasks(), "worker1"},
      {true, "writing checkpoint", &cluster.tasks(), "ps0"},
  };
  ChiefRun second = cluster.RunChief(slow_writes, &stop_tasks);
  ExpectResumedFrom(second, path);
  ExpectTasksStopped(cluster, second);
}

}  // namespace
}  // namespace pstrain
