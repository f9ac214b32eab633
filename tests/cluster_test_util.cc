#include "tests/cluster_test_util.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

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
        }
      },
      nullptr);
  return run;
}

DaemonOptions FastDaemonOptions(const std::string& tf_config) {
  DaemonOptions options;
  absl::StatusOr<TfConfig> config = ParseTfConfig(tf_config);
  EXPECT_TRUE(config.ok()) << config.status();
  if (config.ok()) options.config = *config;
  options.register_timeout = absl::Seconds(30);
  options.heartbeat_interval = absl::Milliseconds(200);
  options.chief_timeout = absl::Seconds(10);
  options.rpc_timeout = absl::Seconds(10);
  return options;
}

}  // namespace pstrain
