#ifndef PSTRAIN_TESTS_CLUSTER_TEST_UTIL_H_
#define PSTRAIN_TESTS_CLUSTER_TEST_UTIL_H_

// What the cluster tests share: reading Keras-style epoch lines back, watching a group of
// real processes, and daemon options with short timeouts.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/daemon/daemon_options.h"
#include "deploy/local/process_group.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

// Losses read back from Keras-style lines "Epoch 3/10 - loss: 2.2871 - accuracy: ...",
// in order. Other lines are ignored.
std::vector<double> ParseEpochLosses(const std::string& output);

// The last val_accuracy printed in Keras-style epoch lines; -1 when there is none.
double LastValAccuracy(const std::string& output);

// Asynchronous (parameter-server) training ends a few tenths of a percent either side of
// where it got to, run to run. EXPECTs that it reached `target`: the best epoch's
// val_accuracy is at least `target` and the last one within 0.02 of the best (no collapse).
void ExpectReachesValAccuracy(const std::string& output, double target);

// A fault injected once while a group runs: `signal` goes to `victim` when `reporter`
// first writes a stdout line starting with `trigger` (e.g. "Epoch 2/").
struct SignalOnLine {
  std::string reporter;
  std::string trigger;
  std::string victim;
  int signal = 0;
  // Watch the reporter's stderr (its log) instead, for a line that contains `trigger`.
  bool in_log = false;
  // Fire on this occurrence of the line (1 = the first).
  int occurrence = 1;
  // Called (on the thread that runs CollectRun) right after the signal was sent, e.g. to
  // tell another thread that the victim is stopped; may be empty.
  std::function<void()> after;
};

// Every process's exit and everything it wrote, by process name.
struct ProcessRun {
  std::vector<ProcessGroup::Exit> exits;
  std::map<std::string, std::string> stdout_of;
  std::map<std::string, std::string> stderr_of;
  bool signalled = false;   // the SignalOnLine fault was sent
  int matches = 0;          // lines that matched the fault's trigger so far
  absl::Time signalled_at;
};

// Waits for every process of `group` (see ProcessGroup::Wait) and collects its output,
// sending `fault` (may be null) when its line appears.
ProcessRun CollectRun(ProcessGroup& group, absl::Duration timeout, absl::Duration grace,
                      const SignalOnLine* fault = nullptr);

// The most resident memory the process `name` of `run` held, the kernel's count as it
// exited (ProcessGroup::Exit::peak_resident_bytes); 0 when `run` has no such process.
int64_t PeakResidentBytesOf(const ProcessRun& run, const std::string& name);

// A fresh, empty folder `name` under the test's temp dir (TEST_TMPDIR, else /tmp).
std::string FreshTestDir(const std::string& name);

// XORs the byte at `offset` of file `path` with `mask` (a corruption the checksums must
// catch). Returns false when the file cannot be opened or has no such byte.
bool FlipByte(const std::string& path, int64_t offset, char mask);

// Starts `n` train/train processes ("worker0", ...) of a chief-less multi_worker_mirrored
// cluster on free ports, each with `args` and --strategy=multi_worker_mirrored and one
// BLAS thread. Returns their addresses.
std::vector<std::string> StartMirroredWorkers(ProcessGroup& group, int n,
                                              const std::vector<std::string>& args);

// When the log line `line` ("I 19:30:01.123 worker0] ...") was written: the clock time in
// it on the day that puts it nearest to `near` (the test's own clock). The time of an
// event as the process that saw it recorded it, not when the harness read the line.
// Errors: INVALID_ARGUMENT a line without such a time.
absl::StatusOr<absl::Time> LogLineTime(absl::string_view line, absl::Time near);

// The first line of `log` that contains `text`, or "" when none does.
std::string FirstLineWith(const std::string& log, absl::string_view text);

// The lines of `log` that contain `text`.
std::vector<std::string> LinesWith(const std::string& log, absl::string_view text);

// The value after "<key>: " in the last line of `out` that has it ("val_loss" in an epoch
// line, "test accuracy" in tools/evaluate's); NaN, failing the test, when none has it.
double LastFigure(const std::string& out, const std::string& key);

// The chief's "steps run per worker: N M ..." (its log at the end of a job), in worker
// order; empty when the line is missing.
std::vector<int64_t> StepsPerWorker(const std::string& chief_log);

// The tiny job (tests/testdata/tiny_synthetic.json) with `patch` merged in (RFC 7386: an
// object merges key by key, anything else replaces), written to a fresh folder `name`
// under the test's temp dir. Returns its path.
std::string WriteTinyJob(const std::string& name, const nlohmann::json& patch);

// Where the tasks of a cluster started by StartTestCluster listen.
struct TestCluster {
  std::string chief;
  std::vector<std::string> ps;
  std::vector<std::string> workers;
};

// Starts the real binaries of a parameter-server cluster in `group` on free loopback
// ports: "ps0".., "worker0".. and then "chief", each configured only by its TF_CONFIG and
// given `task_flags`; the chief also `chief_flags`, worker i also `worker_flags[i]` (a
// straggler's delay, say), every ps `ps_flags` (its --checkpoint_dir). Workers compute on
// the CPU with one BLAS thread.
TestCluster StartTestCluster(ProcessGroup& group, int num_ps, int num_workers,
                             const std::vector<std::string>& task_flags,
                             const std::vector<std::string>& chief_flags,
                             const std::map<int, std::vector<std::string>>& worker_flags = {},
                             const std::vector<std::string>& ps_flags = {});

// Addresses on free loopback ports for a cluster of 1 chief, `ps` ps and `workers`
// workers, in MakeTfConfig's form (deploy/local/local_cluster.h).
std::vector<std::pair<std::string, std::vector<std::string>>> LoopbackCluster(int ps,
                                                                              int workers);

// How many times slower this test binary runs than a plain build: 6 under
// ThreadSanitizer, 2 under AddressSanitizer, otherwise 1. A wait that only bounds how long
// a healthy run may take is multiplied by it (ScaledForSanitizers), so that a sanitizer
// build fails on what it reports, not on its own slowness (tests/sanitizers.sh scales
// Bazel's test timeouts to match).
int SanitizerSlowdown();
absl::Duration ScaledForSanitizers(absl::Duration wait);

// The options a daemon gets from `tf_config`, with heartbeats and deadlines short enough
// for tests (a lost chief is noticed in 10 s, not the default 30 s; times
// SanitizerSlowdown(), as are the register and RPC deadlines).
DaemonOptions FastDaemonOptions(const std::string& tf_config);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_CLUSTER_TEST_UTIL_H_
