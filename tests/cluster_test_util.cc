#include "tests/cluster_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

// The number after `label` on each line that has it, in order.
std::vector<double> NumbersAfter(const std::string& output, absl::string_view label) {
  std::vector<double> numbers;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "Epoch ")) continue;
    const size_t at = line.find(label);
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(at + label.size());
    double value = 0;
    if (absl::SimpleAtod(rest.substr(0, rest.find(' ')), &value)) numbers.push_back(value);
  }
  return numbers;
}

}  // namespace

std::vector<double> ParseEpochLosses(const std::string& output) {
  return NumbersAfter(output, " - loss: ");
}

double LastValAccuracy(const std::string& output) {
  const std::vector<double> values = NumbersAfter(output, " - val_accuracy: ");
  return values.empty() ? -1 : values.back();
}

void ExpectReachesValAccuracy(const std::string& output, double target) {
  const std::vector<double> values = NumbersAfter(output, " - val_accuracy: ");
  ASSERT_FALSE(values.empty()) << output;
  const double best = *std::max_element(values.begin(), values.end());
  EXPECT_GE(best, target) << output;
  EXPECT_GE(values.back(), best - 0.02) << output;
}

ProcessRun CollectRun(ProcessGroup& group, absl::Duration timeout, absl::Duration grace,
                      const SignalOnLine* fault) {
  ProcessRun run;
  run.exits = group.Wait(
      timeout, grace,
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? run.stderr_of : run.stdout_of)[name] += line + "\n";
        const bool matches =
            fault != nullptr && !run.signalled && is_stderr == fault->in_log &&
            name == fault->reporter &&
            (fault->in_log ? absl::StrContains(line, fault->trigger)
                           : absl::StartsWith(line, fault->trigger));
        if (matches && ++run.matches >= fault->occurrence) {
          run.signalled = true;
          run.signalled_at = absl::Now();
          EXPECT_TRUE(group.Signal(fault->victim, fault->signal).ok()) << fault->victim;
          if (fault->after) fault->after();
        }
      },
      nullptr);
  return run;
}

int64_t PeakResidentBytesOf(const ProcessRun& run, const std::string& name) {
  for (const ProcessGroup::Exit& exit : run.exits) {
    if (exit.name == name) return exit.peak_resident_bytes;
  }
  return 0;
}

bool FlipByte(const std::string& path, int64_t offset, char mask) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!file.good()) return false;
  file.seekg(offset);
  char byte = 0;
  if (!file.read(&byte, 1)) return false;
  byte ^= mask;
  file.seekp(offset);
  return static_cast<bool>(file.write(&byte, 1));
}

std::string FreshTestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

std::vector<std::string> StartMirroredWorkers(ProcessGroup& group, int n,
                                              const std::vector<std::string>& args) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(n);
  EXPECT_TRUE(ports.ok()) << ports.status();
  std::vector<std::string> addresses;
  if (!ports.ok()) return addresses;
  for (int port : *ports) addresses.push_back(absl::StrCat("localhost:", port));
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> a = args;
    a.push_back("--strategy=multi_worker_mirrored");
    EXPECT_TRUE(group
                    .Start({absl::StrCat("worker", i), "train/train", a,
                            {{"TF_CONFIG", MakeTfConfig({{"worker", addresses}}, "worker", i)},
                             {"OPENBLAS_NUM_THREADS", "1"}}})
                    .ok());
  }
  return addresses;
}

absl::StatusOr<absl::Time> LogLineTime(absl::string_view line, absl::Time near) {
  // "L HH:MM:SS.mmm tag] message"
  const std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(' ', 2));
  int h = 0, m = 0, s = 0, ms = 0;
  if (fields.size() < 3 || fields[1].size() != 12 ||
      !absl::SimpleAtoi(fields[1].substr(0, 2), &h) ||
      !absl::SimpleAtoi(fields[1].substr(3, 2), &m) ||
      !absl::SimpleAtoi(fields[1].substr(6, 2), &s) ||
      !absl::SimpleAtoi(fields[1].substr(9, 3), &ms)) {
    return absl::InvalidArgumentError(absl::StrCat("no log time in \"", line, "\""));
  }
  const absl::TimeZone zone = absl::LocalTimeZone();
  const absl::CivilDay today = absl::ToCivilDay(near, zone);
  absl::Time best = absl::InfinitePast();
  for (int day = -1; day <= 1; ++day) {
    const absl::Time t =
        absl::FromCivil(absl::CivilSecond(today + day) + (h * 3600 + m * 60 + s), zone) +
        absl::Milliseconds(ms);
    if (absl::AbsDuration(t - near) < absl::AbsDuration(best - near)) best = t;
  }
  return best;
}

std::string FirstLineWith(const std::string& log, absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, text)) return std::string(line);
  }
  return "";
}

std::vector<std::string> LinesWith(const std::string& log, absl::string_view text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, text)) lines.push_back(std::string(line));
  }
  return lines;
}

double LastFigure(const std::string& out, const std::string& key) {
  const size_t at = out.rfind(key + ": ");
  EXPECT_NE(at, std::string::npos) << key << " in " << out;
  if (at == std::string::npos) return NAN;
  return std::strtod(out.c_str() + at + key.size() + 2, nullptr);
}

std::vector<int64_t> StepsPerWorker(const std::string& chief_log) {
  const std::string marker = "steps run per worker: ";
  std::vector<int64_t> steps;
  const std::string line = FirstLineWith(chief_log, marker);
  if (line.empty()) return steps;
  const std::string numbers = line.substr(line.find(marker) + marker.size());
  for (absl::string_view n : absl::StrSplit(numbers, ' ', absl::SkipEmpty())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(n, &v)) steps.push_back(v);
  }
  return steps;
}

std::string WriteTinyJob(const std::string& name, const nlohmann::json& patch) {
  std::ifstream in("tests/testdata/tiny_synthetic.json");
  nlohmann::json job = nlohmann::json::parse(in, nullptr, false);
  EXPECT_FALSE(job.is_discarded());
  job.merge_patch(patch);
  const std::string path = FreshTestDir(name) + "/job.json";
  std::ofstream(path) << job.dump(1);
  return path;
}

TestCluster StartTestCluster(ProcessGroup& group, int num_ps, int num_workers,
                             const std::vector<std::string>& task_flags,
                             const std::vector<std::string>& chief_flags,
                             const std::map<int, std::vector<std::string>>& worker_flags,
                             const std::vector<std::string>& ps_flags) {
  TestCluster cluster;
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(1 + num_ps + num_workers);
  EXPECT_TRUE(ports.ok()) << ports.status();
  if (!ports.ok()) return cluster;
  auto address = [&](int i) { return absl::StrCat("localhost:", (*ports)[i]); };
  cluster.chief = address(0);
  for (int i = 0; i < num_ps; ++i) cluster.ps.push_back(address(1 + i));
  for (int i = 0; i < num_workers; ++i) cluster.workers.push_back(address(1 + num_ps + i));
  const std::vector<std::pair<std::string, std::vector<std::string>>> spec = {
      {"chief", {cluster.chief}}, {"ps", cluster.ps}, {"worker", cluster.workers}};
  for (int i = 0; i < num_ps; ++i) {
    std::vector<std::string> flags = task_flags;
    flags.insert(flags.end(), ps_flags.begin(), ps_flags.end());
    EXPECT_TRUE(group.Start({absl::StrCat("ps", i), "ps_server/ps_server", flags,
                             {{"TF_CONFIG", MakeTfConfig(spec, "ps", i)}}})
                    .ok());
  }
  for (int i = 0; i < num_workers; ++i) {
    std::vector<std::string> flags = task_flags;
    flags.push_back("--device=cpu");
    if (auto it = worker_flags.find(i); it != worker_flags.end()) {
      flags.insert(flags.end(), it->second.begin(), it->second.end());
    }
    EXPECT_TRUE(group.Start({absl::StrCat("worker", i), "worker/worker", flags,
                             {{"TF_CONFIG", MakeTfConfig(spec, "worker", i)},
                              {"OPENBLAS_NUM_THREADS", "1"}}})
                    .ok());
  }
  std::vector<std::string> flags = task_flags;
  flags.insert(flags.end(), chief_flags.begin(), chief_flags.end());
  EXPECT_TRUE(group.Start({"chief", "chief/chief", flags,
                           {{"TF_CONFIG", MakeTfConfig(spec, "chief", 0)}}})
                  .ok());
  return cluster;
}

std::vector<std::pair<std::string, std::vector<std::string>>> LoopbackCluster(int ps,
                                                                              int workers) {
  auto ports = PickFreePorts(1 + ps + workers);
  EXPECT_TRUE(ports.ok()) << ports.status();
  std::vector<std::pair<std::string, std::vector<std::string>>> cluster = {
      {"chief", {}}, {"ps", {}}, {"worker", {}}};
  if (!ports.ok()) return cluster;
  for (int i = 0; i < 1 + ps + workers; ++i) {
    const int job = i == 0 ? 0 : (i <= ps ? 1 : 2);
    cluster[job].second.push_back("127.0.0.1:" + std::to_string((*ports)[i]));
  }
  return cluster;
}

int SanitizerSlowdown() {
#if defined(__SANITIZE_THREAD__)
  return 6;
#elif defined(__SANITIZE_ADDRESS__)
  return 2;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return 6;
#elif __has_feature(address_sanitizer)
  return 2;
#else
  return 1;
#endif
#else
  return 1;
#endif
}

absl::Duration ScaledForSanitizers(absl::Duration wait) { return wait * SanitizerSlowdown(); }

DaemonOptions FastDaemonOptions(const std::string& tf_config) {
  DaemonOptions options;
  absl::StatusOr<TfConfig> config = ParseTfConfig(tf_config);
  EXPECT_TRUE(config.ok()) << config.status();
  if (config.ok()) options.config = *config;
  options.register_timeout = ScaledForSanitizers(absl::Seconds(30));
  options.heartbeat_interval = absl::Milliseconds(200);
  options.chief_timeout = ScaledForSanitizers(absl::Seconds(10));
  options.rpc_timeout = ScaledForSanitizers(absl::Seconds(10));
  return options;
}

}  // namespace pstrain
