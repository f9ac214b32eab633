// Watching real runs from outside, with tools that share no code with pstrain:
//  - train's and the chief's TensorBoard event files read back by a Node reader
//    (protobufjs, a CRC-32C from npm) and compared with the printed epoch lines;
//  - a real Prometheus (Debian's) scraping every task of a real cluster, asked over its
//    HTTP API for the chief's validation accuracy and a ps' push count;
//  - the chief's dashboard loaded in headless Chromium during the run.
// tools/install_test_deps.sh installs Prometheus, Chromium and the npm packages.

#include <sys/stat.h>
#include <sys/wait.h>

#include <csignal>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
                  .Start({"train", "worker/train",
                          {"--job=tests/testdata/tiny_synthetic.json", "--epochs=3",
                           "--logdir=" + logdir, "--log_every_steps=5", "--log_format=json"},
                          {}})
                  .ok());
  ProcessRun run = CollectRun(group, absl::Minutes(2), absl::Seconds(5));
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
std::map<std::string, double> Query(httplib::Client& prometheus, const std::string& promql) {
  std::map<std::string, double> values;
  httplib::Result response =
      prometheus.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
  EXPECT_TRUE(response) << promql;
  if (!response) return values;
  const nlohmann::json answer = nlohmann::json::parse(response->body, nullptr, false);
  EXPECT_EQ(answer.value("status", ""), "success") << response->body;
  if (!answer.contains("data")) return values;
  for (const nlohmann::json& series : answer["data"]["result"]) {
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(series["value"][1].get<std::string>(), &value));
    values[series["metric"].value("task", "")] = value;
  }
  return values;
}

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

  // The demo's job, short, every task with its metrics port; the metrics outlive the job
  // by a few scrapes so Prometheus records the final values.
  LocalClusterOptions options;
  options.bin_dir = ".";
  options.chief_args = {"--job=examples/fashion_mnist.json", "--epochs=3",
                        "--logdir=" + logdir, "--log_every_steps=200",
                        "--checkpoint_dir=" + dir + "/checkpoints"};
  options.worker_args = {"--device=cpu"};
  options.task_args = {"--metrics_linger=6s"};
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

  // The dashboard, in Chromium, during the run; a thread, so the cluster's output keeps
  // being read meanwhile.
  std::string dashboard_out;
  int dashboard_exit = -1;
  std::thread dashboard;
  const std::string screenshot = dir + "/dashboard.png";
  std::string chief_out, errors;
  std::map<std::string, std::string> logs;
  std::vector<ProcessGroup::Exit> exits = cluster.Wait(
      absl::Minutes(8), absl::Seconds(10),
      [&](int, const std::string& name, bool is_stderr, const std::string& line) {
        (is_stderr ? logs[name] : chief_out) += line + "\n";
        if (is_stderr && line.rfind("E ", 0) == 0) errors += name + ": " + line + "\n";
        // Chromium starts while the job starts (it takes seconds on a loaded machine);
        // the page waits for every chart to have data.
        if (is_stderr && name == "chief" && line.find("worker tasks registered") != std::string::npos &&
            !dashboard.joinable()) {
          const std::string url = absl::StrCat("http://127.0.0.1:", metrics_ports["chief"], "/");
          dashboard = std::thread([&, url] {
            const CommandResult r = RunCommand(absl::StrCat(
                "NODE_PATH=", kNodeModules, " node tests/node/check_dashboard.js ", url, " ",
                screenshot));
            dashboard_out = r.out;
            dashboard_exit = r.exit_code;
          });
        }
      },
      nullptr);
  if (dashboard.joinable()) dashboard.join();
  for (const auto& exit : exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << logs[exit.name];
  }
  const std::vector<std::map<std::string, double>> epochs = EpochFigures(chief_out);
  ASSERT_EQ(epochs.size(), 3u) << chief_out;
  // The chief's log records each epoch with its figures as structured fields.
  EXPECT_NE(logs["chief"].find("epoch 3: 60000 samples in"), std::string::npos) << logs["chief"];
  EXPECT_NE(logs["chief"].find(" epoch=3 "), std::string::npos) << logs["chief"];
  EXPECT_NE(logs["chief"].find(" steps=938 "), std::string::npos) << logs["chief"];

  // The dashboard drew every chart and filled its tables, with nothing from elsewhere.
  ASSERT_EQ(dashboard_exit, 0) << dashboard_out;
  const nlohmann::json page = nlohmann::json::parse(dashboard_out, nullptr, false);
  ASSERT_TRUE(page.is_object()) << dashboard_out;
  for (const char* chart : {"loss-epoch", "accuracy-epoch", "loss-step", "samples-step"}) {
    EXPECT_GT(page["points"][chart].get<int>(), 0) << chart << ": " << dashboard_out;
  }
  EXPECT_EQ(page["tasks"], 4) << dashboard_out;   // 2 ps and 2 workers
  EXPECT_EQ(page["layout"], 4) << dashboard_out;  // the seed model's 4 variables
  EXPECT_GE(page["checkpoints"].get<int>(), 1) << dashboard_out;
  EXPECT_TRUE(page["foreign_requests"].empty()) << dashboard_out;
  EXPECT_EQ(stat(screenshot.c_str(), &st), 0);

  // Prometheus scraped every task, and holds the job's figures as the job printed and
  // the ps counted them. (The tasks are gone now: last_over_time reads past their end.)
  httplib::Client prometheus("127.0.0.1", prometheus_port);
  prometheus.set_read_timeout(10, 0);
  const std::map<std::string, double> up = Query(prometheus, "max_over_time(up[10m])");
  for (const auto& [task, port] : metrics_ports) {
    EXPECT_EQ(up.count(task) ? up.at(task) : 0, 1) << task << " was never scraped";
  }
  const std::map<std::string, double> accuracy = Query(
      prometheus, "last_over_time(pstrain_training_validation_accuracy{task=\"chief\"}[10m])");
  ASSERT_EQ(accuracy.count("chief"), 1u);
  EXPECT_NEAR(accuracy.at("chief"), epochs.back().at("val_accuracy"), 5.1e-5);
  const std::map<std::string, double> pushes =
      Query(prometheus, "last_over_time(pstrain_ps_pushes_total[10m])");
  for (const char* ps : {"ps0", "ps1"}) {
    const int64_t logged = LoggedPushes(logs[ps]);
    ASSERT_GT(logged, 0) << logs[ps];
    ASSERT_EQ(pushes.count(ps), 1u) << ps;
    EXPECT_EQ(static_cast<int64_t>(pushes.at(ps)), logged) << ps;
  }
  const std::map<std::string, double> steps =
      Query(prometheus, "last_over_time(pstrain_training_global_step{task=\"chief\"}[10m])");
  EXPECT_EQ(steps.count("chief") ? steps.at("chief") : 0, 3 * 938);
  (void)prometheus_group.Signal("prometheus", SIGTERM);
  (void)prometheus_group.Wait(absl::Seconds(20), absl::Seconds(5),
                              [](int, const std::string&, bool, const std::string&) {}, nullptr);

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
