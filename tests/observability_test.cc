// Watching real runs from outside, with tools that share no code with pstrain:
//  - train's and the chief's TensorBoard event files read back by a Node reader
//    (protobufjs, a CRC-32C from npm) and compared with the printed epoch lines;
//  - a real Prometheus (Debian's) scraping every task of a real cluster, asked over its
//    HTTP API for the chief's validation accuracy and a ps' push count;
//  - the chief's dashboard loaded in headless Chromium while the chief serves the job,
//    its charts checked from the page against the rules of common/dashboard/chart_rules.js.
// Nothing waits on the clock's luck: the tasks linger after the job until the test has
// read what it needs, and every wait is for an event, bounded by a generous deadline
// (times SanitizerSlowdown()) that only a broken run reaches.
// tools/install_test_deps.sh installs Prometheus, Chromium and the npm packages.

#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

constexpr char kNodeModules[] = "/usr/local/lib/pstrain-test-node/node_modules";

struct CommandResult {
  int exit_code = -1;
  std::string out;
};

// Runs `command` with sh, its stdout captured (stderr goes to the test log).
CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Every epoch line's figures ("loss", "accuracy", "val_loss", "val_accuracy"), in order.
std::vector<std::map<std::string, double>> EpochFigures(const std::string& output) {
  std::vector<std::map<std::string, double>> epochs;
  const std::regex figure(" - (loss|accuracy|val_loss|val_accuracy): ([0-9.]+)");
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(output, '\n', absl::SkipEmpty()))) {
    if (line.rfind("Epoch ", 0) != 0) continue;
    std::map<std::string, double> figures;
    for (std::sregex_iterator it(line.begin(), line.end(), figure), end; it != end; ++it) {
      figures[(*it)[1]] = std::stod((*it)[2]);
    }
    epochs.push_back(figures);
  }
  return epochs;
}

// The event files under `logdir` as the independent Node reader decodes them.
nlohmann::json ReadEvents(const std::string& logdir) {
  const CommandResult read = RunCommand(absl::StrCat(
      "NODE_PATH=", kNodeModules, " node tests/node/read_events.js common/tensorboard/event.proto ",
      logdir));
  EXPECT_EQ(read.exit_code, 0) << read.out;
  return nlohmann::json::parse(read.out, nullptr, /*allow_exceptions=*/false);
}

// Every epoch's value of `tag` in `run` equals the printed figure (to its 4 decimals).
void ExpectEpochTagMatches(const nlohmann::json& events, const std::string& run,
                           const std::string& tag, const std::string& printed,
                           const std::vector<std::map<std::string, double>>& epochs) {
  const nlohmann::json& points = events[run][tag];
  ASSERT_EQ(points.size(), epochs.size()) << run << "/" << tag << ": " << events.dump();
  for (size_t e = 0; e < epochs.size(); ++e) {
    EXPECT_EQ(points[e][0].get<int64_t>(), static_cast<int64_t>(e)) << run << "/" << tag;
    EXPECT_NEAR(points[e][1].get<double>(), epochs[e].at(printed), 5.1e-5)
        << run << "/" << tag << " epoch " << e + 1;
  }
}

void RequireNodePackages() {
  struct stat st;
  ASSERT_EQ(stat(absl::StrCat(kNodeModules, "/protobufjs").c_str(), &st), 0)
      << "npm packages missing: run tools/install_test_deps.sh";
}

TEST(ObservabilityTest, TrainEventFilesReadBackByAnIndependentReaderMatchTheEpochLines) {
  RequireNodePackages();
  const std::string logdir = FreshTestDir("train_logdir");
  ProcessGroup group;
  ASSERT_TRUE(group
                  .Start({"train", "train/train",
                          {"--job=tests/testdata/tiny_synthetic.json", "--epochs=3",
                           "--logdir=" + logdir, "--log_every_steps=5", "--log_format=json"},
                          {}})
                  .ok());
  ProcessRun run = CollectRun(group, ScaledForSanitizers(absl::Minutes(2)), absl::Seconds(5));
  ASSERT_EQ(run.exits.size(), 1u);
  ASSERT_EQ(run.exits[0].exit_code, 0) << run.stderr_of["train"];
  const std::vector<std::map<std::string, double>> epochs = EpochFigures(run.stdout_of["train"]);
  ASSERT_EQ(epochs.size(), 3u) << run.stdout_of["train"];
  // --log_format=json: every log record is one JSON object with a dated time.
  int records = 0;
  for (const std::string& line : std::vector<std::string>(
           absl::StrSplit(run.stderr_of["train"], '\n', absl::SkipEmpty()))) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(record.is_object()) << line;
    EXPECT_TRUE(std::regex_match(record.value("time", ""),
                                 std::regex("20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T.*")))
        << line;
    EXPECT_TRUE(record.contains("task") && record.contains("message")) << line;
    EXPECT_EQ(record.value("level", ""), "info") << line;
    ++records;
  }
  EXPECT_GE(records, 1);

  const nlohmann::json events = ReadEvents(logdir);
  ASSERT_TRUE(events.is_object());
  EXPECT_EQ(events["files"], 2);  // train/ and validation/
  ExpectEpochTagMatches(events, "train", "epoch_loss", "loss", epochs);
  ExpectEpochTagMatches(events, "train", "epoch_accuracy", "accuracy", epochs);
  // tiny_synthetic has 400 examples in batches of 32: 13 steps an epoch, 39 in all, so a
  // record at global steps 5, 10, ..., 35 with the job's learning rate.
  const nlohmann::json& batch_loss = events["train"]["batch_loss"];
  ASSERT_EQ(batch_loss.size(), 7u) << events.dump();
  for (size_t i = 0; i < batch_loss.size(); ++i) {
    EXPECT_EQ(batch_loss[i][0].get<int64_t>(), static_cast<int64_t>(5 * (i + 1)));
    EXPECT_GT(batch_loss[i][1].get<double>(), 0);
  }
  for (const nlohmann::json& rate : events["train"]["batch_learning_rate"]) {
    EXPECT_NEAR(rate[1].get<double>(), 0.003, 1e-7);
  }
  ASSERT_EQ(events["train"]["batch_samples_per_second"].size(), 7u);
  EXPECT_GT(events["train"]["batch_samples_per_second"][3][1].get<double>(), 0);
  // No validation data, no validation figures.
  EXPECT_TRUE(events["validation"].empty()) << events.dump();
}

// A ps' "served the job" log line: pushes=N.
int64_t LoggedPushes(const std::string& log) {
  std::smatch match;
  if (!std::regex_search(log, match, std::regex("served the job.* pushes=([0-9]+)"))) return -1;
  return std::stoll(match[1]);
}

// Prometheus' answer to an instant query: one value per series, by the "task" label.
// Errors: UNAVAILABLE Prometheus does not answer (yet); INTERNAL an answer that is not a
// successful query result.
absl::StatusOr<std::map<std::string, double>> Query(httplib::Client& prometheus,
                                                    const std::string& promql) {
  httplib::Result response =
      prometheus.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
  if (!response) return absl::UnavailableError(absl::StrCat("no answer to ", promql));
  const nlohmann::json answer = nlohmann::json::parse(response->body, nullptr, false);
  if (!answer.is_object() || answer.value("status", "") != "success" ||
      !answer.contains("data")) {
    return absl::InternalError(absl::StrCat(promql, ": ", response->body));
  }
  std::map<std::string, double> values;
  for (const nlohmann::json& series : answer["data"]["result"]) {
    double value = 0;
    if (!absl::SimpleAtod(series["value"][1].get<std::string>(), &value)) {
      return absl::InternalError(absl::StrCat(promql, ": ", series.dump()));
    }
    values[series["metric"].value("task", "")] = value;
  }
  return values;
}

// What the test reads from the cluster's output while it runs (the cluster is waited for
// on a thread of its own).
struct ClusterOutput {
  absl::Mutex mu;
  std::string chief_out ABSL_GUARDED_BY(mu);
  std::map<std::string, std::string> logs ABSL_GUARDED_BY(mu);
  bool workers_registered ABSL_GUARDED_BY(mu) = false;
  // Tasks done with the job and serving their final metrics (--metrics_linger).
  int lingering ABSL_GUARDED_BY(mu) = 0;
  bool exited ABSL_GUARDED_BY(mu) = false;

  bool RegisteredOrExited() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return workers_registered || exited;
  }
  bool AllLingeringOrExited() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return lingering == 5 || exited;
  }
};

TEST(ObservabilityTest, PrometheusScrapesEveryTaskAndTheDashboardShowsTheRun) {
  RequireNodePackages();
  struct stat st;
  if (stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", &st) != 0) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)";
  }
  ASSERT_EQ(stat("/usr/bin/prometheus", &st), 0) << "run tools/install_test_deps.sh";
  const std::string dir = FreshTestDir("prometheus");
  const std::string logdir = dir + "/tensorboard";
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(1);
  ASSERT_TRUE(ports.ok());
  const int prometheus_port = (*ports)[0];

  // The demo's job, short, every task with its metrics port. Nothing here waits on the
  // clock: every task lingers after the job (serving its final metrics, the chief its
  // dashboard) until the test has read all it needs and sends SIGTERM, which ends a
  // linger at once. The linger is only a bound for a test that dies.
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.chief_args = {"--job=examples/fashion_mnist.json", "--epochs=3",
                        "--logdir=" + logdir, "--log_every_steps=200",
                        "--checkpoint_dir=" + dir + "/checkpoints"};
  options.worker_args = {"--device=cpu"};
  options.task_args = {"--metrics_linger=30m"};
  std::map<std::string, int> metrics_ports;
  options.metrics_ports = &metrics_ports;
  // Prometheus first, with a scrape config naming every task's port; the ports are
  // chosen by StartLocalCluster, so the cluster is set up in a group that starts later.
  ProcessGroup cluster;
  ASSERT_TRUE(StartLocalCluster(options, &cluster).ok());
  ASSERT_EQ(metrics_ports.size(), 5u);
  {
    std::ofstream config(dir + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
           << "scrape_configs:\n  - job_name: pstrain\n    static_configs:\n";
    for (const auto& [task, port] : metrics_ports) {
      config << "      - targets: ['127.0.0.1:" << port << "']\n"
             << "        labels: {task: " << task << "}\n";
    }
  }
  ProcessGroup prometheus_group;
  ASSERT_TRUE(prometheus_group
                  .Start({"prometheus", "/usr/bin/prometheus",
                          {"--config.file=" + dir + "/prometheus.yml",
                           "--storage.tsdb.path=" + dir + "/data",
                           absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port),
                           "--log.level=warn"},
                          {}})
                  .ok());

  // The cluster is waited for on a thread, so its output keeps being read while the test
  // looks at it from outside; the test's stop request reaches the tasks through the
  // group's own thread (a ProcessGroup is driven by one thread).
  ClusterOutput output;
  std::atomic<bool> stop{false};
  bool stop_sent = false;  // the waiter thread's own
  std::vector<ProcessGroup::Exit> exits;
  std::thread waiter([&] {
    exits = cluster.Wait(
        ScaledForSanitizers(absl::Minutes(10)), absl::Seconds(10),
        [&](int, const std::string& name, bool is_stderr, const std::string& line) {
          absl::MutexLock lock(&output.mu);
          (is_stderr ? output.logs[name] : output.chief_out) += line + "\n";
          if (!is_stderr) return;
          if (name == "chief" && line.find("worker tasks registered") != std::string::npos) {
            output.workers_registered = true;
          }
          if (line.find("the job is over; /metrics stays up") != std::string::npos) {
            ++output.lingering;
          }
        },
        [&] {
          if (stop.load() && !stop_sent) {
            for (const auto& [task, port] : metrics_ports) (void)cluster.Signal(task, SIGTERM);
            stop_sent = true;
          }
          return false;
        });
    absl::MutexLock lock(&output.mu);
    output.exited = true;
  });
  // However the test leaves, the tasks are told to stop and the waiter is joined.
  struct StopCluster {
    std::atomic<bool>* stop;
    std::thread* waiter;
    ~StopCluster() {
      stop->store(true);
      if (waiter->joinable()) waiter->join();
    }
  } stop_cluster{&stop, &waiter};

  // The dashboard, in Chromium, once the chief serves the job (Chromium takes seconds to
  // start on a loaded machine; the page waits until every chart shows the 3 epochs and a
  // checkpoint is listed, which the lingering chief keeps showing).
  {
    absl::MutexLock lock(&output.mu);
    output.mu.AwaitWithTimeout(absl::Condition(&output, &ClusterOutput::RegisteredOrExited),
                               ScaledForSanitizers(absl::Minutes(3)));
    ASSERT_TRUE(output.workers_registered) << output.logs["chief"];
  }
  const std::string screenshot = dir + "/dashboard.png";
  const absl::Duration page_timeout = ScaledForSanitizers(absl::Minutes(4));
  CommandResult dashboard;
  std::thread dashboard_thread([&] {
    dashboard = RunCommand(absl::StrCat(
        "NODE_PATH=", kNodeModules, " node tests/node/check_dashboard.js http://127.0.0.1:",
        metrics_ports.at("chief"), "/ ", screenshot, " ", absl::ToInt64Milliseconds(page_timeout),
        " 3"));
  });
  // Every task done with the job: its final figures are set and served.
  {
    absl::MutexLock lock(&output.mu);
    output.mu.AwaitWithTimeout(absl::Condition(&output, &ClusterOutput::AllLingeringOrExited),
                               ScaledForSanitizers(absl::Minutes(8)));
  }
  dashboard_thread.join();
  std::string chief_out;
  std::map<std::string, std::string> logs;
  int lingering = 0;
  {
    absl::MutexLock lock(&output.mu);
    chief_out = output.chief_out;
    logs = output.logs;
    lingering = output.lingering;
  }
  ASSERT_EQ(lingering, 5) << "not every task finished the job:\n" << logs["chief"];
  const std::vector<std::map<std::string, double>> epochs = EpochFigures(chief_out);
  ASSERT_EQ(epochs.size(), 3u) << chief_out;
  // The chief's log records each epoch with its figures as structured fields.
  EXPECT_NE(logs["chief"].find("epoch 3: 60000 samples in"), std::string::npos) << logs["chief"];
  EXPECT_NE(logs["chief"].find(" epoch=3 "), std::string::npos) << logs["chief"];
  EXPECT_NE(logs["chief"].find(" steps=938 "), std::string::npos) << logs["chief"];

  // The dashboard drew every chart and filled its tables, with nothing from elsewhere, and
  // its charts keep the rules of chart_rules.js as the page drew them: every epoch tick a
  // whole number at a data point, no point on the frame, no legend over a point or line.
  EXPECT_EQ(dashboard.exit_code, 0) << dashboard.out;
  const nlohmann::json page = nlohmann::json::parse(dashboard.out, nullptr, false);
  if (page.is_object()) {
    for (const char* chart : {"loss-epoch", "accuracy-epoch", "loss-step", "samples-step"}) {
      EXPECT_GT(page["points"][chart].get<int>(), 0) << chart << ": " << dashboard.out;
    }
    EXPECT_EQ(page["tasks"], 4) << dashboard.out;   // 2 ps and 2 workers
    EXPECT_EQ(page["layout"], 4) << dashboard.out;  // the seed model's 4 variables
    EXPECT_GE(page["checkpoints"].get<int>(), 1) << dashboard.out;
    EXPECT_TRUE(page["foreign_requests"].empty()) << dashboard.out;
    EXPECT_TRUE(page["chart_violations"].empty()) << dashboard.out;
    // The epoch charts show the 3 epochs with a tick at each; a legend stands somewhere.
    EXPECT_EQ(page["epoch_ticks"]["loss-epoch"], nlohmann::json::parse("[\"1\",\"2\",\"3\"]"))
        << dashboard.out;
    EXPECT_EQ(page["epoch_ticks"]["accuracy-epoch"], nlohmann::json::parse("[\"1\",\"2\",\"3\"]"))
        << dashboard.out;
    EXPECT_EQ(page["legends"], 3) << dashboard.out;  // loss, accuracy, samples per second
    EXPECT_EQ(stat(screenshot.c_str(), &st), 0);
  } else {
    ADD_FAILURE() << dashboard.out;
  }

  // Prometheus scraped every task, and holds the job's figures as the job printed and
  // the ps counted them: asked until they appear (a scrape a second, once Prometheus is
  // up), with a deadline that only bounds a broken run.
  std::map<std::string, int64_t> logged_pushes;
  for (const char* ps : {"ps0", "ps1"}) {
    logged_pushes[ps] = LoggedPushes(logs[ps]);
    ASSERT_GT(logged_pushes[ps], 0) << logs[ps];
  }
  httplib::Client prometheus("127.0.0.1", prometheus_port);
  prometheus.set_read_timeout(10, 0);
  std::map<std::string, absl::StatusOr<std::map<std::string, double>>> answers;
  const std::map<std::string, std::string> queries = {
      {"up", "max_over_time(up[10m])"},
      {"accuracy",
       "last_over_time(pstrain_training_validation_accuracy{task=\"chief\"}[10m])"},
      {"pushes", "last_over_time(pstrain_ps_pushes_total[10m])"},
      {"steps", "last_over_time(pstrain_training_global_step{task=\"chief\"}[10m])"}};
  const auto value = [&](const std::string& query, const std::string& task) {
    const absl::StatusOr<std::map<std::string, double>>& answer = answers.at(query);
    return answer.ok() && answer->count(task) ? answer->at(task) : -1.0;
  };
  const auto complete = [&] {
    for (const auto& [task, port] : metrics_ports) {
      if (value("up", task) != 1) return false;
    }
    for (const auto& [ps, logged] : logged_pushes) {
      if (value("pushes", ps) != static_cast<double>(logged)) return false;
    }
    return value("accuracy", "chief") >= 0 && value("steps", "chief") == 3 * 938;
  };
  const absl::Time give_up = absl::Now() + ScaledForSanitizers(absl::Minutes(2));
  do {
    for (const auto& [name, promql] : queries) answers.insert_or_assign(name, Query(prometheus, promql));
    if (complete()) break;
    absl::SleepFor(absl::Milliseconds(500));
  } while (absl::Now() < give_up);
  for (const auto& [name, answer] : answers) EXPECT_TRUE(answer.ok()) << answer.status();
  for (const auto& [task, port] : metrics_ports) {
    EXPECT_EQ(value("up", task), 1) << task << " was never scraped";
  }
  EXPECT_NEAR(value("accuracy", "chief"), epochs.back().at("val_accuracy"), 5.1e-5);
  for (const auto& [ps, logged] : logged_pushes) {
    EXPECT_EQ(static_cast<int64_t>(value("pushes", ps)), logged) << ps;
  }
  EXPECT_EQ(value("steps", "chief"), 3 * 938);
  (void)prometheus_group.Signal("prometheus", SIGTERM);
  (void)prometheus_group.Wait(absl::Seconds(20), absl::Seconds(5),
                              [](int, const std::string&, bool, const std::string&) {}, nullptr);

  // Done reading: SIGTERM ends every task's linger, and each exits 0.
  stop.store(true);
  waiter.join();
  for (const auto& exit : exits) {
    absl::MutexLock lock(&output.mu);
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << output.logs[exit.name];
  }

  // The chief's TensorBoard files hold every epoch's figures as its lines printed them.
  const nlohmann::json events = ReadEvents(logdir);
  ASSERT_TRUE(events.is_object());
  ExpectEpochTagMatches(events, "train", "epoch_loss", "loss", epochs);
  ExpectEpochTagMatches(events, "train", "epoch_accuracy", "accuracy", epochs);
  ExpectEpochTagMatches(events, "validation", "epoch_loss", "val_loss", epochs);
  ExpectEpochTagMatches(events, "validation", "epoch_accuracy", "val_accuracy", epochs);
  EXPECT_GE(events["train"]["batch_loss"].size(), 10u) << events.dump();
}

}  // namespace
}  // namespace pstrain
